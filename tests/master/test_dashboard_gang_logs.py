"""The dashboard's job page of a multi-node gang shows every part's log tail, each under its node
and rank (logs are kept per part), over real HTTP from a master driven by two fake workers."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from master_fakes import FakeWorker, client_for, config

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.testing import FakeClock
from master.app import Master
from master.http.server import LOG_TAIL_BYTES


@pytest.fixture
async def web_master(tmp_path: pathlib.Path) -> AsyncIterator[Master]:
    async with Master(config(tmp_path), clock=FakeClock(), http_listen="127.0.0.1:0") as m:
        yield m


async def _page(m: Master, job_id: str) -> str:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{m.http.http_port}/jobs/{job_id}") as r:
        assert r.status == 200
        return await r.text()


def _block(page: str, rank: int) -> str:
    """The text of the ``<pre>`` of part ``rank`` (rank 0's keeps the single-node page's id)."""
    tag = f'<pre id="{"log" if rank == 0 else f"log-{rank}"}">'
    assert tag in page, page
    return page.split(tag, 1)[1].split("</pre>", 1)[0]


async def test_a_gangs_job_page_shows_each_parts_tail_under_its_node(web_master: Master) -> None:
    a, b = FakeWorker(web_master.port, "node-a"), FakeWorker(web_master.port, "node-b")
    await a.connect()
    await b.connect()
    try:
        async with client_for(web_master) as stub:
            spec = pb.JobSpec(command=["x"], gpus=4)
            job_id = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec))).job.id
        ra, rb = await a.recv_kind("assign"), await b.recv_kind("assign")
        assert (ra.node_rank, rb.node_rank) == (0, 1)
        long_b = b"".join(b"b line %05d\n" % i for i in range(2000))  # more than a part's share
        await a.log(job_id, 1, 0, b"rank 0 <says> hello\n")
        await b.log(job_id, 1, 0, long_b)
        await a.barrier()
        await b.barrier()
        page = await _page(web_master, job_id)
    finally:
        await a.close()
        await b.close()
    assert "<h3>node-a (rank 0)</h3>" in page and "<h3>node-b (rank 1)</h3>" in page
    assert page.index("node-a (rank 0)") < page.index("node-b (rank 1)")
    assert _block(page, 0) == "rank 0 &lt;says&gt; hello\n"  # escaped
    tail_b = _block(page, 1)
    assert tail_b.endswith("b line 01999\n") and "b line 00000" not in tail_b
    assert len(tail_b) <= LOG_TAIL_BYTES // 2  # the parts share the page's budget


async def test_a_single_node_jobs_page_keeps_one_tail(web_master: Master) -> None:
    a = FakeWorker(web_master.port, "node-a")
    await a.connect()
    try:
        async with client_for(web_master) as stub:
            spec = pb.JobSpec(command=["x"], gpus=1)
            job_id = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec))).job.id
        await a.recv_kind("assign")
        await a.log(job_id, 1, 0, b"solo\n")
        await a.barrier()
        page = await _page(web_master, job_id)
    finally:
        await a.close()
    assert _block(page, 0) == "solo\n" and "<h3>" not in page and 'id="log-1"' not in page
