"""The client plane against a real grpc.aio server and a real SQLite file."""

from __future__ import annotations

import asyncio
import pathlib

import grpc
import pytest
from master_fakes import WAIT_S, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.model import JobState
from master.app import Master
from master.services.events import JobEvent


async def submit(stub: cgrpc.HorusServiceAsyncStub, request_id: str = "", **kw: object) -> pb.Job:
    resp = await stub.SubmitJob(cpb.SubmitJobRequest(request_id=request_id, spec=spec(**kw)))
    return resp.job


async def test_submit_get_roundtrip(stub: cgrpc.HorusServiceAsyncStub) -> None:
    resp = await stub.SubmitJob(
        cpb.SubmitJobRequest(
            spec=spec(
                name="train",
                job_type="ResNet-18 (batch size 32)",
                env=[
                    pb.EnvVar(key="A", value="1"),
                    pb.EnvVar(key="CUDA_VISIBLE_DEVICES", value="3"),
                    pb.EnvVar(key="NVIDIA_VISIBLE_DEVICES", value="all"),
                ],
                hints=pb.ProfileHints(util_avg=40.0),
            )
        )
    )
    assert resp.created
    job = resp.job
    assert job.state == pb.JOB_STATE_PENDING and job.attempt == 0 and job.id
    assert job.spec.owner == "anonymous"
    assert [e.key for e in job.spec.env] == ["A"]  # reserved variables stripped
    got = await stub.GetJob(cpb.GetJobRequest(job_id=job.id))
    assert got.spec.name == "train" and got.spec.hints.util_avg == 40.0
    assert got.submitted_at > 0 and got.reason == "no ready nodes"


async def test_idempotent_submit(master: Master, stub: cgrpc.HorusServiceAsyncStub) -> None:
    req = cpb.SubmitJobRequest(request_id="req-1", spec=spec(name="once"))
    first, second = await asyncio.gather(stub.SubmitJob(req), stub.SubmitJob(req))
    third = await stub.SubmitJob(req)
    assert first.job.id == second.job.id == third.job.id
    assert sorted([first.created, second.created, third.created]) == [False, False, True]
    assert await master.store.read.count_jobs() == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"command": []}, "command"),
        ({"gpus": 0}, "gpus"),
        ({"gpus": 65}, "gpus"),
        ({"env": [pb.EnvVar(key="1BAD", value="x")]}, "env"),
        ({"hints": pb.ProfileHints(util_avg=140.0)}, "hints.util_avg"),
        ({"image": "bad image!"}, "image"),
        ({"priority": 5000}, "priority"),
        ({"mounts": ["relative:/x"]}, "mounts"),
    ],
)
async def test_bad_spec_is_invalid_argument_and_writes_nothing(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SubmitJob(cpb.SubmitJobRequest(request_id="r", spec=spec(**kwargs)))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.value.details() or "").startswith(f"{field}:")
    assert await master.store.read.count_jobs() == 0


async def test_request_id_too_long(stub: cgrpc.HorusServiceAsyncStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SubmitJob(cpb.SubmitJobRequest(request_id="x" * 129, spec=spec()))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "request_id" in (err.value.details() or "")


async def test_get_missing_and_malformed(stub: cgrpc.HorusServiceAsyncStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetJob(cpb.GetJobRequest(job_id="abcdef012345"))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    for bad in ("", "../../etc/passwd", "x" * 65):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetJob(cpb.GetJobRequest(job_id=bad))
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_list_paging_and_filters(stub: cgrpc.HorusServiceAsyncStub) -> None:
    ids = [(await submit(stub, owner="alice" if i % 2 else "bob", name=f"j{i}")).id for i in range(7)]
    await stub.CancelJob(cpb.CancelJobRequest(job_id=ids[0]))
    seen, token, pages = [], "", 0
    while True:
        resp = await stub.ListJobs(cpb.ListJobsRequest(page_size=3, page_token=token))
        seen += [j.id for j in resp.jobs]
        pages += 1
        token = resp.next_page_token
        if not token:
            break
    assert seen == ids and pages == 3
    alice = await stub.ListJobs(cpb.ListJobsRequest(owner="alice"))
    assert [j.id for j in alice.jobs] == ids[1::2]
    cancelled = await stub.ListJobs(cpb.ListJobsRequest(states=[pb.JOB_STATE_CANCELLED]))
    assert [j.id for j in cancelled.jobs] == [ids[0]]
    pending = await stub.ListJobs(cpb.ListJobsRequest(states=[pb.JOB_STATE_PENDING], page_size=5000))
    assert len(pending.jobs) == 6 and not pending.next_page_token


@pytest.mark.parametrize(
    "request_",
    [
        cpb.ListJobsRequest(page_token="garbage"),
        cpb.ListJobsRequest(page_size=-1),
        cpb.ListJobsRequest(states=[pb.JOB_STATE_UNSPECIFIED]),
        cpb.ListJobsRequest(states=[42]),  # type: ignore[list-item]
    ],
)
async def test_list_bad_values(stub: cgrpc.HorusServiceAsyncStub, request_: cpb.ListJobsRequest) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.ListJobs(request_)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


async def test_cancel_pending_then_terminal(stub: cgrpc.HorusServiceAsyncStub) -> None:
    job = await submit(stub)
    cancelled = await stub.CancelJob(cpb.CancelJobRequest(job_id=job.id, reason="not needed"))
    assert cancelled.state == pb.JOB_STATE_CANCELLED and cancelled.reason == "not needed"
    assert cancelled.HasField("finished_at")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CancelJob(cpb.CancelJobRequest(job_id=job.id))
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CancelJob(cpb.CancelJobRequest(job_id="000000000000"))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


async def test_watch_sees_changes_from_now_on(stub: cgrpc.HorusServiceAsyncStub) -> None:
    before = await submit(stub, name="before")
    call = stub.WatchJobs(cpb.WatchJobsRequest())
    await call.initial_metadata()  # subscribed
    job = await submit(stub, name="after")
    await stub.CancelJob(cpb.CancelJobRequest(job_id=job.id))
    async with asyncio.timeout(WAIT_S):
        first, second = await call.read(), await call.read()
    call.cancel()
    assert first.job.id == job.id and first.job.state == pb.JOB_STATE_PENDING
    assert first.previous_state == pb.JOB_STATE_UNSPECIFIED
    assert second.job.state == pb.JOB_STATE_CANCELLED and second.previous_state == pb.JOB_STATE_PENDING
    assert before.id not in (first.job.id, second.job.id)


async def test_watch_one_job_and_missing_job(stub: cgrpc.HorusServiceAsyncStub) -> None:
    a, b = await submit(stub), await submit(stub)
    call = stub.WatchJobs(cpb.WatchJobsRequest(job_id=b.id))
    await call.initial_metadata()
    await stub.CancelJob(cpb.CancelJobRequest(job_id=a.id))
    await stub.CancelJob(cpb.CancelJobRequest(job_id=b.id))
    async with asyncio.timeout(WAIT_S):
        ev = await call.read()
    call.cancel()
    assert ev.job.id == b.id
    missing = stub.WatchJobs(cpb.WatchJobsRequest(job_id="000000000000"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await missing.read()
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


async def test_slow_watcher_is_dropped(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, watch_queue=10) as m, client_for(m) as stub:
        call = stub.WatchJobs(cpb.WatchJobsRequest())
        await call.initial_metadata()
        job = await m.jobs.get((await submit(stub)).id, None)
        for i in range(5000):  # far more than the stream's flow-control window holds
            m.core.events.publish(JobEvent(job, JobState.PENDING, float(i), "spam"))
            if len(m.core.events) == 0:
                break
            if i % 100 == 0:
                await asyncio.sleep(0)  # let the server write what it can
        assert len(m.core.events) == 0  # dropped, and the master never waited for it
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async with asyncio.timeout(WAIT_S):
                while True:
                    await call.read()
        assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await submit(stub)).id


async def test_get_logs_bad_values(stub: cgrpc.HorusServiceAsyncStub) -> None:
    job = await submit(stub)
    assert [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job.id))] == []  # no attempt yet
    for req in (
        cpb.GetLogsRequest(job_id=job.id, attempt=3),
        cpb.GetLogsRequest(job_id=job.id, offset=-1),
        cpb.GetLogsRequest(job_id=job.id, attempt=-1),
        cpb.GetLogsRequest(job_id="../x"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetLogs(req).read()
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, req
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetLogs(cpb.GetLogsRequest(job_id="000000000000")).read()
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


async def test_cluster_info_nodes_gpus_profiles(stub: cgrpc.HorusServiceAsyncStub) -> None:
    info = await stub.GetClusterInfo(cpb.GetClusterInfoRequest())
    assert info.policy == "fifo" and info.version and info.max_gpus_per_node == 0
    assert list((await stub.ListNodes(cpb.ListNodesRequest())).nodes) == []
    assert list((await stub.ListGpus(cpb.ListGpusRequest())).gpus) == []
    assert list((await stub.ListProfiles(cpb.ListProfilesRequest())).profiles) == []


async def test_unexpected_error_is_internal_and_master_survives(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(*_: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(master.core.store.read, "job", boom)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetJob(cpb.GetJobRequest(job_id="abcdef012345"))
    assert err.value.code() is grpc.StatusCode.INTERNAL
    assert "disk on fire" not in (err.value.details() or "")
    monkeypatch.undo()
    assert (await submit(stub)).id


async def test_oversized_message_rejected(stub: cgrpc.HorusServiceAsyncStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(command=["x" * 5_000_000])))
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (await submit(stub)).id
