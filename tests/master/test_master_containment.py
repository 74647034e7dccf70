"""GPU memory caps and OOM containment in the live master (docs/sharing.md). A real grpc.aio
server on 127.0.0.1:0, a real SQLite file, a fake worker and a fake clock.

Each attempt's cap goes out in its Assignment (declared, else its workload's footprint; none for
a job alone); an ending the worker names a memory cause is contained: the grower re-queued once
to run alone with its measured peak plus the margin as its cap (not failed; the model learns the
peak, so the next job of its kind is packed by it, also after a restart), a neighbour that ran
out of memory below its cap re-queued as it was, an OOM alone a failure; a cap no GPU can hold is
refused at submission."""

from __future__ import annotations

import pathlib

import grpc
import pytest
from master_fakes import FakeWorker, client_for, config, spec

from horus_core import reasoncodes as rc
from horus_core.caps import raised, with_margin
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.interference import default_model
from horus_core.interference.profiles import GAVEL_PROFILES, RESERVE_MIB
from horus_core.model import JobSpec
from horus_core.testing import FakeClock
from master.app import Master

A = "ResNet-18 (batch size 32)"
B = "ResNet-18 (batch size 16)"  # (the pair shares a V100 at full speed in the table)


async def end(
    w: FakeWorker, job_id: str, state: int, cause: str, peak: int, shared: bool, code: int, over: bool = False
) -> None:
    upd = wpb.AttemptUpdate(
        job_id=job_id, attempt=1, state=state, exit_code=code, reason="x", cause=cause,  # type: ignore[arg-type]
        peak_gpu_memory_mib=peak, shared=shared, neighbour_over_cap=over,
    )  # fmt: skip
    await w.send(update=upd)
    await w.barrier()


async def contained(
    m: Master, stub: cgrpc.HorusServiceAsyncStub, w: FakeWorker, grower_id: str, victim_id: str
) -> None:
    """The grower over its cap re-queued alone with its peak; the neighbour's OOM re-queued as it was."""
    await end(w, grower_id, pb.JOB_STATE_CANCELLED, "GpuMemoryExceeded", 4600, True, 143)
    g = await stub.GetJob(cpb.GetJobRequest(job_id=grower_id))
    assert g.state == pb.JOB_STATE_PENDING and g.reason_code == rc.GPU_MEMORY_EXCEEDED
    assert g.spec.exclusive and g.contained_mib == raised(4096, 4600) == g.spec.gpu_memory_mib
    assert g.gpu_memory_peak_mib == 4600 and g.reason.startswith("GpuMemoryExceeded: attempt 1")

    await end(w, victim_id, pb.JOB_STATE_FAILED, "CudaOutOfMemory", 700, True, 1, over=True)
    v = await stub.GetJob(cpb.GetJobRequest(job_id=victim_id))
    assert v.state == pb.JOB_STATE_PENDING and v.reason_code == rc.PREEMPTED and not v.spec.exclusive
    assert "a neighbour grew" in v.reason and v.spec.gpu_memory_mib == 0


async def test_caps_go_out_and_a_grower_runs_alone_a_neighbour_again_an_oom_alone_fails(
    tmp_path: pathlib.Path,
) -> None:
    cfg = config(tmp_path, policy="horus")
    async with Master(cfg, clock=FakeClock(), interference=default_model()) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n", n_gpus=1)
        await w.connect()
        grower = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=A, gpu_memory_mib=4096)))).job
        victim = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=B)))).job
        ga, va = await w.recv_kind("assign"), await w.recv_kind("assign")
        caps = {ga.job_id: ga.gpu_memory_cap_mib, va.job_id: va.gpu_memory_cap_mib}
        assert caps == {grower.id: 4096, victim.id: GAVEL_PROFILES[B][2]}  # declared / the footprint
        for a in (ga, va):
            await w.update(a.job_id, 1, pb.JOB_STATE_RUNNING)
        await w.barrier()

        # (no pass meanwhile: a pass would place one or name its wait over the reasons read here)
        async with m.scheduler._pass_lock:
            await contained(m, stub, w, grower.id, victim.id)

        seen: dict[str, wpb.Assignment] = {}
        for _ in range(2):  # one GPU: each runs in turn, the grower alone
            await m.scheduler.run_once()
            a = await w.recv_kind("assign")
            seen[a.job_id] = a
            await w.update(a.job_id, 2, pb.JOB_STATE_RUNNING)
            await w.update(a.job_id, 2, pb.JOB_STATE_SUCCEEDED, 0)
            await w.barrier()
        assert seen[grower.id].attempt == 2 and seen[grower.id].spec.exclusive
        assert seen[grower.id].gpu_memory_cap_mib == 0  # (its GPU to itself: nothing to hold)
        assert seen[victim.id].attempt == 2 and seen[victim.id].gpu_memory_cap_mib == GAVEL_PROFILES[B][2]
        assert m.core.learner.footprint(JobSpec(("x",), job_type=A)) == with_margin(4600)  # (learned)

        alone = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=B)))).job
        await m.scheduler.run_once()
        await w.recv_kind("assign")
        await w.update(alone.id, 1, pb.JOB_STATE_RUNNING)
        await end(w, alone.id, pb.JOB_STATE_FAILED, "CudaOutOfMemory", 900, False, 1)
        got = await stub.GetJob(cpb.GetJobRequest(job_id=alone.id))
        assert got.state == pb.JOB_STATE_FAILED and got.gpu_memory_peak_mib == 900  # its own failure
        await w.close()

    # the learned peak survives a restart: the next job of its kind is packed by it
    async with Master(cfg, clock=FakeClock(), interference=default_model()) as m:
        assert m.core.learner.footprint(JobSpec(("x",), job_type=A)) == with_margin(4600)


async def test_a_cap_no_gpu_can_hold_is_refused_at_submission(tmp_path: pathlib.Path) -> None:
    async with Master(config(tmp_path), clock=FakeClock()) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n", n_gpus=1)  # 16384 MiB
        await w.connect()
        ok = await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_memory_mib=16384 - RESERVE_MIB)))
        assert ok.job.spec.gpu_memory_mib == 16384 - RESERVE_MIB
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_memory_mib=16384)))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "largest GPU in the cluster has 16384 MiB" in str(err.value.details())
        with pytest.raises(grpc.aio.AioRpcError, match="largest GPU of type v100"):
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_memory_mib=16000, gpu_types=["v100"])))
        none_known = spec(gpu_memory_mib=30000, gpu_types=["a100"])  # (it waits: GpuTypeUnavailable)
        assert (await stub.SubmitJob(cpb.SubmitJobRequest(spec=none_known))).job.spec.gpu_memory_mib == 30000
        await w.close()
