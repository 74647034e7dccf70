"""The head gang's reservation in the live master (issue 10): a gang that does not fit keeps
the GPUs it waits for, says so in its pending reason, and starts on them once they are free.
A real grpc.aio server on 127.0.0.1:0, a real SQLite file, a fake worker and a fake clock."""

from __future__ import annotations

import pathlib

from master_fakes import FakeWorker, client_for, config, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.policies.backfill import GangReserve
from horus_core.policies.fifo import Fifo
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.staged import drive
from horus_core.testing import FakeClock
from master.app import Master


async def test_a_waiting_gang_keeps_the_gpus_it_waits_for_and_starts_on_them(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    policy = drive(Fifo(), TypeGate(reserve=GangReserve(wait_s=0.0)))  # head at its second pass
    async with Master(config(tmp_path), clock=clock, policy=policy) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        await w.connect()

        async def submit(gpus: int) -> str:
            got: pb.Job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=gpus)))).job
            return got.id

        async def job(job_id: str) -> pb.Job:
            got: pb.Job = await stub.GetJob(cpb.GetJobRequest(job_id=job_id))
            return got

        first = await submit(1)
        assert (await w.recv_kind("assign")).job_id == first
        await w.update(first, 1, pb.JOB_STATE_RUNNING)
        await w.barrier()
        gang = await submit(2)
        await m.scheduler.run_once()
        await m.scheduler.run_once()  # left waiting by a pass: now the head gang
        small = await submit(1)  # fifo alone would put it on the idle GPU
        await m.scheduler.run_once()
        assert (await job(small)).state == pb.JOB_STATE_PENDING
        head = await job(gang)
        assert head.state == pb.JOB_STATE_PENDING and "2 GPU(s) reserved for it on node-a" in head.reason
        await w.update(first, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
        await m.scheduler.run_once()
        assign = await w.recv_kind("assign")
        assert assign.job_id == gang and len(assign.gpus) == 2
        assert (await job(small)).state == pb.JOB_STATE_PENDING
