"""The dashboard over real HTTP from an in-process master with auth on: login, bearer tokens and
the cookie, who sees which jobs, and escaping of everything a user controls."""

from __future__ import annotations

import pathlib
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from horus_core import HorusClient
from horus_core.errors import InvalidArgument
from horus_core.model import Gpu, Job, JobSpec, JobState, NodeState
from horus_core.plane import JobGpuReading
from horus_core.testing import FakeClock
from master.app import Master
from master.config import MasterConfig
from master.http import pages
from master.observe.view import ClusterView, GpuView, NodeView
from master.services.nodes import NodeEntry
from master.store.learned import PairMeasurement, RecordRatesOp

EVIL_NAME = "<script>alert(1)</script>"
EVIL_CMD = ("echo", '"><img src=x onerror=alert(2)>')


@pytest.fixture
async def master(tmp_path: pathlib.Path) -> AsyncIterator[Master]:
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-alice alice\ntok-bob bob\ntok-root root admin\n")
    cfg = MasterConfig(
        db_path=tmp_path / "h.db",
        listen="127.0.0.1:0",
        auth_tokens=tokens,
        join_token="jt",
        shutdown_grace_s=0.2,
    )
    async with Master(cfg, clock=FakeClock(), http_listen="127.0.0.1:0") as m:
        yield m


async def submit(m: Master, token: str, spec: JobSpec) -> str:
    async with HorusClient.connect(f"127.0.0.1:{m.port}", token=token) as c:
        return (await c.submit(spec)).id


async def get(
    m: Master, path: str, token: str | None = None, **kw: object
) -> tuple[int, str, aiohttp.ClientResponse]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as s,
        s.get(
            f"http://127.0.0.1:{m.http.http_port}{path}", headers=headers, allow_redirects=False, **kw
        ) as r,  # type: ignore[arg-type]
    ):
        return r.status, await r.text(), r


async def test_users_see_their_own_jobs_escaped(master: Master) -> None:
    mine = await submit(master, "tok-alice", JobSpec(command=EVIL_CMD, name=EVIL_NAME))
    theirs = await submit(master, "tok-bob", JobSpec(command=("sleep", "1"), name="bobs-job"))

    status, text, _ = await get(master, "/queue", "tok-alice")
    assert status == 200
    assert mine in text and theirs not in text and "bobs-job" not in text
    assert "2 job(s) pending" in text
    assert '<meta http-equiv="refresh"' in text  # live pages reload themselves
    assert EVIL_NAME not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text

    status, text, resp = await get(master, f"/jobs/{mine}", "tok-alice")
    assert status == 200 and "<img" not in text and "&lt;img src=x onerror=alert(2)&gt;" in text
    assert "script-src" not in resp.headers["Content-Security-Policy"]  # (default-src 'none' covers it)
    assert resp.headers["Content-Security-Policy"].startswith("default-src 'none'")

    status, text, _ = await get(master, f"/jobs/{theirs}", "tok-alice")
    assert status == 403 and "bobs-job" not in text
    status, _, _ = await get(master, "/jobs/000000000000", "tok-alice")
    assert status == 404

    status, text, _ = await get(master, "/queue", "tok-root")
    assert status == 200 and mine in text and theirs in text


async def test_pages_need_a_token(master: Master) -> None:
    for path in ("/", "/queue", "/pairs", "/jobs/abc"):
        status, _, resp = await get(master, path)
        assert status == 303 and resp.headers["Location"] == "/login"
    status, _, _ = await get(master, "/", "not-a-token")
    assert status == 401
    status, text, _ = await get(master, "/login")
    assert status == 200 and 'name="token"' in text


async def test_login_sets_a_cookie_that_authenticates(master: Master) -> None:
    url = f"http://127.0.0.1:{master.http.http_port}"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:  # (an IP host)
        async with s.post(f"{url}/login", data={"token": "wrong"}, allow_redirects=False) as r:
            assert r.status == 401
        async with s.post(f"{url}/login", data={"token": "tok-bob"}, allow_redirects=False) as r:
            assert r.status == 303
            cookie = r.cookies["horus_token"]
            assert cookie["httponly"] and cookie["samesite"] == "Strict"
        async with s.get(f"{url}/", allow_redirects=False) as r:
            assert r.status == 200
            assert "signed in as bob" in await r.text()


async def test_sdk_applies_job_files(master: Master) -> None:
    async with HorusClient.connect(f"127.0.0.1:{master.port}", token="tok-alice") as c:
        job = await c.apply("name: from-yaml\nresources: {accelerators: 1}\nrun: python train.py\n")
        assert job.spec.name == "from-yaml" and job.spec.owner == "alice"
        assert job.spec.command == ("sh", "-c", "python train.py")
        with pytest.raises(InvalidArgument, match=r"setup: unknown field \(line 2\)"):
            await c.apply("run: x\nsetup: y\n")
        listed = await c.list()
    assert [j.spec.name for j in listed] == ["from-yaml"]  # the bad file submitted nothing


async def test_pair_heat_map_escapes_job_types(master: Master) -> None:
    evil = '<svg onload="alert(3)">'
    op = RecordRatesOp(evil, "v100", 1, None, (PairMeasurement("ResNet-50", 45.0, 100.0),), 0.0)
    await master.core.store.write(op)
    status, text, _ = await get(master, "/pairs", "tok-bob")
    assert status == 200
    assert evil not in text and "&lt;svg onload=&quot;alert(3)&quot;&gt;" in text
    assert 'class="heatmap"' in text and ">0.45<" in text


def test_long_queue_page_shows_its_head() -> None:
    jobs = tuple(Job(f"j{i:05d}", JobSpec(command=("x",), owner="u"), JobState.PENDING) for i in range(510))
    view = ClusterView(nodes=(), jobs={j.id: j for j in jobs}, pending=jobs, speeds={})
    text = pages.queue_page(view, lambda job: True, None)
    assert text.count('class="job"') == pages.MAX_QUEUE_ROWS == 500
    assert "j00499" in text and "j00500" not in text and "and 10 more" in text
    assert "510 job(s) pending" in text


def test_queue_page_follows_the_passes_order_and_shows_codes() -> None:
    jobs = tuple(
        Job(f"j{i}", JobSpec(command=("x",), owner="u"), JobState.PENDING, reason=f"r{i}", reason_code=code)
        for i, code in enumerate(("Resources", "Submitted", "NodeCordoned"))
    )
    view = ClusterView(nodes=(), jobs={j.id: j for j in jobs}, pending=jobs, speeds={})
    text = pages.queue_page(view, lambda job: True, None, {"j2": ("default", 1), "j0": ("default", 2)}.get)
    rows = text.split("<tbody>")[1].split("</tr>")[:3]
    assert ["j2" in rows[0], "j0" in rows[1], "j1" in rows[2]] == [True, True, True]
    assert "<td>default</td><td>1</td>" in rows[0] and "<td>NodeCordoned</td>" in rows[0]
    assert "<td>3</td>" in rows[2] and "<td>Submitted</td>" in rows[2]


def test_cluster_page_shows_cordons_drains_and_quarantines() -> None:
    gpus = (
        Gpu("g0", "n1", 0, "V100", 16384, "v100", healthy=False, quarantine="Xid 79"),
        Gpu("g1", "n1", 1, "V100", 16384, "v100"),
    )
    entry = NodeEntry(
        "n1", gpus, NodeState.READY, 0.0, admin=NodeState.DRAINING, drain_deadline=time.time() + 600
    )
    node = NodeView(entry, tuple(GpuView(g, None, (), ()) for g in entry.model().gpus))
    text = pages.cluster_page(ClusterView((node,), {}, (), {}), lambda job: True, None)
    row = text.split('id="nodes"')[1].split("</tr>")[1]
    assert "DRAINING (preempts in 600 s)" in row or "DRAINING (preempts in 599 s)" in row
    assert "0: Xid 79" in row


def test_job_page_shows_the_reason_code() -> None:
    job = Job("j1", JobSpec(command=("x",)), JobState.PENDING, reason="needs 2 GPUs", reason_code="Resources")
    text = pages.job_page(job, ClusterView((), {}, (job,), {}), [], "", lambda j: True, None)
    assert "Resources: needs 2 GPUs" in text


async def test_the_jobs_page_lists_finished_jobs_only_to_their_owner(master: Master) -> None:
    mine = await submit(master, "tok-alice", JobSpec(command=("true",), name="alices-job"))
    theirs = await submit(master, "tok-bob", JobSpec(command=("true",), name="bobs-job"))
    async with HorusClient.connect(f"127.0.0.1:{master.port}", token="tok-alice") as c:
        await c.cancel(mine)  # finished: still on the jobs page (not on the queue page)
    status, text, _ = await get(master, "/jobs", "tok-alice")
    assert status == 200 and 'href="/jobs"' in text
    assert mine in text and "CANCELLED" in text and theirs not in text and "bobs-job" not in text
    status, text, _ = await get(master, "/jobs", "tok-root")
    assert mine in text and theirs in text
    assert text.index(theirs) < text.index(mine)  # newest first


async def test_the_queue_page_shows_the_quotas_and_what_the_cluster_cannot_honour(
    tmp_path: pathlib.Path,
) -> None:
    queues = tmp_path / "queues.toml"
    queues.write_text("[queues.team-a]\nnominal = { v100 = 4 }\n[queues.team-b]\nnominal = { v100 = 4 }\n")
    cfg = MasterConfig(db_path=tmp_path / "q.db", listen="127.0.0.1:0", queues=queues, shutdown_grace_s=0.2)
    async with Master(cfg, clock=FakeClock(), http_listen="127.0.0.1:0") as m:
        entry = NodeEntry("n1", tuple(Gpu(f"g{i}", "n1", i, "Tesla V100", 16384, "v100") for i in range(4)),
                          NodeState.READY, 0.0)  # fmt: skip
        m.core.registry.put(entry)
        status, text, _ = await get(m, "/queue")
        assert status == 200 and 'id="quotas"' in text and "team-a" in text and "4 (v100: 4)" in text
        assert (
            "the queues&#x27; quotas of v100 GPUs add up to 8 (team-a 4, team-b 4); the cluster has 4" in text
        )


def test_the_pages_show_each_jobs_gpu_memory_use_and_cap_and_its_floor() -> None:
    gpu = Gpu("g0", "n1", 0, "V100", 16384, "v100")
    spec = JobSpec(command=("x",), min_speed=0.7)
    job = Job("j1", spec, JobState.RUNNING, attempt=1, node="n1", gpus=("g0",), gpu_memory_cap_mib=4096)
    use = JobGpuReading("j1", 1, "g0", 40.0, 1536, 4096)
    entry = NodeEntry("n1", (gpu,), NodeState.READY, 0.0)
    view = ClusterView((NodeView(entry, (GpuView(gpu, None, (job,), (use,)),)),), {"j1": job}, (), {})
    row = pages.cluster_page(view, lambda j: True, None).split('id="gpus"')[1]
    assert "1536 MiB / 4 GiB" in row
    text = pages.job_page(job, view, [], "", lambda j: True, None)
    assert "GPU memory (use / cap)" in text and "1536 MiB / 4 GiB" in text and "0.7x" in text
