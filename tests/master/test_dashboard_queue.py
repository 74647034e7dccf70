"""The dashboard's queue page lists the pending jobs in the order the last scheduling pass served
them (positions set after the dashboard was built), over real HTTP from a master and a fake worker."""

from __future__ import annotations

import pathlib
import re

import aiohttp
from master_fakes import FakeWorker, client_for, config

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.testing import FakeClock
from master.app import Master


async def _queue_rows(m: Master) -> list[tuple[str, str, str]]:
    """(queue, position, job id) of each row of ``/queue``."""
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{m.http.http_port}/queue") as r:
        assert r.status == 200
        text = await r.text()
    body = text.split('<table id="queue">', 1)[1].split("</tbody>", 1)[0]
    row = re.compile(r'<tr><td>([^<]*)</td><td>(\d+)</td><td><a class="job" href="/jobs/([^"]+)"')
    return row.findall(body)


async def test_queue_page_shows_the_last_passes_positions(tmp_path: pathlib.Path) -> None:
    master = Master(config(tmp_path), clock=FakeClock(), http_listen="127.0.0.1:0")
    async with master as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        ids = []
        for name, priority in (("a", 0), ("b", 0), ("c", 5)):
            spec = pb.JobSpec(command=["x"], gpus=1, name=name, priority=priority)
            ids.append((await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec))).job.id)
        placed = await w.recv_kind("assign")
        assert placed.job_id == ids[0]
        await w.update(placed.job_id, placed.attempt, pb.JOB_STATE_RUNNING)
        await w.barrier()
        await m.scheduler.run_once()
        rows = await _queue_rows(m)
        await w.close()
    # fifo serves the higher priority first: c, submitted last, heads the queue.
    assert rows == [("default", "1", ids[2]), ("default", "2", ids[1])]
