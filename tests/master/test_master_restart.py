"""A master restarted on the same database: nodes get a grace period to come back and reconcile."""

from __future__ import annotations

import pathlib

from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.testing import FakeClock


async def run_one_job(tmp_path: pathlib.Path) -> tuple[str, int]:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a")
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        a = await w.recv_kind("assign")
        await w.update(jid, a.attempt, pb.JOB_STATE_RUNNING)
        await w.log(jid, a.attempt, 0, b"before the restart\n")
        await w.barrier()
        await w.crash()
        return jid, a.attempt


async def test_node_reconnects_within_grace_and_keeps_its_attempt(tmp_path: pathlib.Path) -> None:
    jid, attempt = await run_one_job(tmp_path)
    clock = FakeClock()
    async with running_master(tmp_path, clock) as m, client_for(m) as stub:
        nodes = (await stub.ListNodes(cpb.ListNodesRequest())).nodes
        assert [n.name for n in nodes] == ["node-a"]  # known from the database, awaiting its return
        clock.advance(29)
        await m.plane.check_liveness()
        w = FakeWorker(m.port, "node-a")
        await w.connect(running=((jid, attempt),))
        await w.log(jid, attempt, 0, b"before the restart\n")  # a resend after reconnecting: dropped
        await w.log(jid, attempt, 19, b"after\n")
        await w.update(jid, attempt, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
        assert w.skipped == []  # neither a Kill nor a re-assignment
        clock.advance(5)
        await m.plane.check_liveness()
        got = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert (got.state, got.attempt) == (pb.JOB_STATE_SUCCEEDED, attempt)
        logs = b"".join([c.data async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=jid))])
        assert logs == b"before the restart\nafter\n"
        await w.close()


async def test_node_not_back_after_grace_is_lost(tmp_path: pathlib.Path) -> None:
    jid, attempt = await run_one_job(tmp_path)
    clock = FakeClock()
    async with running_master(tmp_path, clock) as m, client_for(m) as stub:
        clock.advance(30)
        await m.plane.check_liveness()
        got = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert got.state == pb.JOB_STATE_PENDING
        assert got.reason == f"attempt {attempt} lost: node node-a lost"
        w = FakeWorker(m.port, "node-a")
        await w.connect()
        assert (await w.recv_kind("assign")).attempt == attempt + 1
        await w.close()
