"""Pending reasons on a live master with mixed GPU types (issue 29, items 4 and 5): real gRPC,
real SQLite, fake clock, workers of 4 V100 and 4 K80 speaking the real stream protocol."""

from __future__ import annotations

import pathlib

from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core import reasoncodes as rc
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from master.app import Master

CORDON, DRAIN = cpb.NODE_SERVICE_ACTION_CORDON, cpb.NODE_SERVICE_ACTION_DRAIN
RESNET = "ResNet-18 (batch size 32)"  # a K80 runs it at a quarter of a V100's speed


async def workers(m: Master) -> tuple[FakeWorker, FakeWorker]:
    v100, k80 = FakeWorker(m.port, "v100-node", n_gpus=4), FakeWorker(m.port, "k80-node", n_gpus=4)
    for g in k80.gpus:
        g.model, g.memory_mib = "Tesla K80", 12206
    await v100.connect()
    await k80.connect()
    return v100, k80


async def pending(m: Master, stub: object, job_id: str) -> pb.Job:
    await m.scheduler.run_once()
    job: pb.Job = await stub.GetJob(cpb.GetJobRequest(job_id=job_id))  # type: ignore[attr-defined]
    assert job.state == pb.JOB_STATE_PENDING, job
    return job


async def test_a_gang_kept_off_slow_k80s_says_so(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, policy="horus") as m, client_for(m) as stub:
        v100, k80 = await workers(m)
        gang = spec(gpus=8, gpus_per_node=4, nodes=2, job_type=RESNET)
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=gang))).job.id
        job = await pending(m, stub, jid)
        assert "k80 GPUs run it below 50% of its speed on its best type" in job.reason, job.reason
        assert "taken only after 4 h in the queue" in job.reason, job.reason
        await v100.close()
        await k80.close()


async def test_a_v100_job_says_node_cordoned_when_only_cordoned_v100s_would_do(
    tmp_path: pathlib.Path,
) -> None:
    async with running_master(tmp_path, policy="horus") as m, client_for(m) as stub:
        v100, k80 = await workers(m)
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="v100-node", action=DRAIN))
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_types=["v100"])))).job.id
        job = await pending(m, stub, jid)
        assert job.reason_code == rc.NODE_CORDONED, job.reason  # not GpuTypeUnavailable: v100s exist
        assert "every GPU of type v100 is on a cordoned or draining node" in job.reason
        await v100.close()
        await k80.close()


async def test_a_cordoned_k80_node_is_no_reason_for_a_v100_job(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, policy="fifo") as m, client_for(m) as stub:
        v100, k80 = await workers(m)
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="k80-node", action=CORDON))
        full = spec(gpus=4, gpu_types=["v100"], exclusive=True)
        first = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=full))).job.id
        assert (await v100.recv_kind("assign")).job_id == first
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_types=["v100"])))).job.id
        job = await pending(m, stub, jid)
        assert job.reason_code == rc.RESOURCES, job.reason  # the V100s are busy, not cordoned
        await v100.close()
        await k80.close()


async def test_idle_gpus_scattered_over_cordoned_nodes_are_no_reason_to_say_node_cordoned(
    tmp_path: pathlib.Path,
) -> None:
    """(Issue 39.) Two cordoned nodes with one idle GPU each, the ready node full: a job needing
    two GPUs on one node waits for Resources, not for the cordons (releasing them would not start
    it); a cordoned node with both GPUs idle is a reason."""
    async with running_master(tmp_path, policy="fifo") as m, client_for(m) as stub:
        a, b, r = (
            FakeWorker(m.port, "a", n_gpus=2),
            FakeWorker(m.port, "b", n_gpus=2),
            FakeWorker(m.port, "r"),
        )
        placed = {}
        for w in (a, b):
            await w.connect()
            placed[w.name] = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(exclusive=True)))).job.id
            assert (await w.run_next()).job_id == placed[w.name]
            await stub.SetNodeService(cpb.SetNodeServiceRequest(node=w.name, action=CORDON))
        await r.connect()
        full = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2, exclusive=True)))).job.id
        assert (await r.run_next()).job_id == full
        two = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2, exclusive=True)))).job.id
        job = await pending(m, stub, two)
        assert job.reason_code == rc.RESOURCES, job.reason
        await a.update(placed["a"], 1, pb.JOB_STATE_SUCCEEDED)
        await a.barrier()
        job = await pending(m, stub, two)
        assert job.reason_code == rc.NODE_CORDONED, job.reason  # a's two GPUs would hold it
        await a.close()
        await b.close()
        await r.close()
