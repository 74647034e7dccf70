"""Dashboard rough edges a new user hit (issue 39), over real HTTP from a master driven by fake
workers on the real stream: the log tail is the log's end (and opens scrolled to it, checked in
headless Chromium where one is installed), the command reads back as a shell line, the pair speeds
fill while jobs share (the learner's running measurements), and the heat map has a legend."""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from html import unescape

import aiohttp
import pytest
from master_fakes import FakeWorker, client_for, config

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.testing import FakeClock
from master.app import Master
from master.store.learned import PairMeasurement, RecordRatesOp
from tests.e2e.test_dashboard_e2e import browser

R18, LM = "ResNet-18 (batch size 32)", "LM (batch size 5)"
COMMAND = ("python", "-c", "print('a b')", "--flag=x y")


@pytest.fixture
async def web_master(tmp_path: pathlib.Path) -> AsyncIterator[Master]:
    cfg = config(tmp_path, policy="binpack", min_speed=0.0)
    async with Master(cfg, clock=FakeClock(), http_listen="127.0.0.1:0") as m:
        yield m


async def page(m: Master, path: str) -> str:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{m.http.http_port}{path}") as r:
        assert r.status == 200
        return await r.text()


async def test_the_job_page_shows_the_logs_end_and_a_command_to_copy(
    web_master: Master, tmp_path: pathlib.Path
) -> None:
    w = FakeWorker(web_master.port, "n1", n_gpus=1)
    await w.connect()
    try:
        async with client_for(web_master) as stub:
            spec = pb.JobSpec(command=list(COMMAND), gpus=1)
            job_id = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec))).job.id
        await w.run_next()
        await w.log(job_id, 1, 0, b"".join(b"line %05d of the log\n" % i for i in range(3000)))
        await w.barrier()
        text = await page(web_master, f"/jobs/{job_id}")
    finally:
        await w.close()
    code = re.search(r"<code>(.*?)</code>", text)
    assert code is not None and shlex.split(unescape(code.group(1))) == list(COMMAND)
    assert unescape(code.group(1)) == shlex.join(COMMAND)  # (was " ".join: not a shell line)
    tail = text.split('<div class="tail"><pre id="log">', 1)[1].split("</pre>", 1)[0]
    lines = tail.splitlines()
    assert lines[-1] == "line 02999 of the log" and "line 00000" not in tail  # the end, not the start
    assert re.fullmatch(r"line \d{5} of the log", lines[0])  # from a whole line
    binary = browser()
    if binary is not None:
        assert_opens_at_the_end(binary, text, tmp_path)


PROBE = """<script>
const box = document.querySelector('.tail'), text = box.querySelector('pre').firstChild;
const seen = (from, to) => { const r = document.createRange(); r.setStart(text, from); r.setEnd(text, to);
  const a = r.getBoundingClientRect(), b = box.getBoundingClientRect();
  return a.top >= b.top - 1 && a.bottom <= b.bottom + 1; };
document.title = JSON.stringify({last: seen(text.length - 21, text.length - 1), first: seen(0, 20),
  scrolls: box.scrollHeight > box.clientHeight});
</script>"""


def assert_opens_at_the_end(binary: str, html: str, tmp_path: pathlib.Path) -> None:
    """The page as served, with a probe script added (the served page's CSP forbids scripts; a
    file copy carries no header), loaded in headless Chromium: is the last line in view?"""
    copy = tmp_path / "job.html"
    copy.write_text(
        html.replace('<meta http-equiv="refresh" content="5">', "").replace("</body>", PROBE + "</body>")
    )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
    ]
    done = subprocess.run(
        [binary, *flags, "--dump-dom", copy.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", done.stdout)
    assert title is not None, done.stdout[:500]
    seen = json.loads(unescape(title.group(1)))
    assert seen == {"last": True, "first": False, "scrolls": True}, seen


async def test_pair_speeds_fill_while_jobs_share_and_the_heat_map_has_a_legend(web_master: Master) -> None:
    clock = web_master.clock
    assert isinstance(clock, FakeClock)
    w = FakeWorker(web_master.port, "n1", n_gpus=1)
    await w.connect()
    try:
        async with client_for(web_master) as stub:
            ids = [
                (
                    await stub.SubmitJob(
                        cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1, job_type=t))
                    )
                ).job.id
                for t in (R18, LM)
            ]
        attempts = [await w.recv_kind("assign"), await w.recv_kind("assign")]  # (in either order)
        assert {a.job_id for a in attempts} == set(ids)
        for a in attempts:
            await w.update(a.job_id, a.attempt, pb.JOB_STATE_RUNNING)
        await w.barrier()
        assert {a.gpus[0] for a in attempts} == {w.gpus[0].uuid}  # sharing the one GPU
        running = tuple((a.job_id, a.attempt) for a in attempts)
        assert "Sharing now" not in await page(web_master, "/pairs")  # (no heartbeat said so yet)
        await w.beat_jobs(w.gpus[0].uuid, *running)
        settling = await page(web_master, "/pairs")
        assert 'id="no-pairs"' in settling and "Sharing now" in settling and "settling" in settling
        clock.advance(10.0)  # (past the learner's settling time)
        for k in range(1, 6):
            p = wpb.AttemptProgress(job_id=ids[0], attempt=1, step=100 * k, samples_per_s=80.0, at=1e9 + k)
            await w.send(progress=p)
        await w.barrier()
        text = await page(web_master, "/pairs")
    finally:
        await w.close()
    assert "nothing measured yet" not in text and "no pair speed learned yet" in text
    table = text.split('id="sharing-now"', 1)[1].split("</table>", 1)[0]
    row = next(r for r in table.split("</tr>") if ids[0] in r)
    assert f"<td>{R18}</td><td>{LM}</td>" in row and "<td>80.0</td><td>5</td>" in row
    assert "no solo measurement yet, predicted" in row
    await web_master.core.store.write(
        RecordRatesOp(R18, "v100", 1, 100.0, (PairMeasurement(LM, 80.0, 100.0),), 0.0)
    )
    text = await page(web_master, "/pairs")
    assert 'class="heatmap"' in text and ">0.80<" in text
    assert 'class="legend"' in text and "1.0x: as fast as alone" in text and "not measured" in text
