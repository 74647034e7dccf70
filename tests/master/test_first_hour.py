"""A new user's first hour on a live master (issue 29): real gRPC, real SQLite, fake clock,
fake workers on the real stream protocol. Jobs with an image and no Docker worker, submit
warnings with the known names, preemptions in the log and on the job, recently ended jobs."""

from __future__ import annotations

import logging
import pathlib

import grpc
import pytest
from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.testing import queue_file, queue_table, queues_toml

DRAIN = cpb.NODE_SERVICE_ACTION_DRAIN
CORDON = cpb.NODE_SERVICE_ACTION_CORDON


async def test_an_image_job_is_refused_when_every_worker_runs_processes(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "p1", runtime="process")
        await w.connect()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(image="busybox:1")))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "needs a worker started with --runtime docker" in (err.value.details() or "")
        assert not (await stub.ListJobs(cpb.ListJobsRequest())).jobs  # nothing stored
        await w.close()


async def test_an_image_job_never_goes_to_a_process_worker(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        docker, plain = (
            FakeWorker(m.port, "d1", runtime="docker"),
            FakeWorker(m.port, "p1", runtime="process"),
        )
        await docker.connect()
        await plain.connect()
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="d1", action=CORDON))
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(image="busybox:1")))).job.id
        await m.scheduler.run_once()
        job = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert job.state == pb.JOB_STATE_PENDING  # not assigned there to FAIL
        assert "needs a Docker worker (--runtime docker); p1 runs jobs as processes" in job.reason
        plain_job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        assert (await plain.recv_kind("assign")).job_id == plain_job  # a plain job still goes there
        await docker.close()
        await plain.close()


async def test_submit_warns_about_unknown_names_and_info_lists_the_known_ones(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, policy="horus") as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1")
        await w.connect()
        typo = spec(job_type="resnet18", gpu_types=["v100", "vv100"])
        typo_answer = await stub.SubmitJob(cpb.SubmitJobRequest(spec=typo))
        assert typo_answer.job.id  # accepted (it may run on the V100s), with two warnings
        unknown, no_type = typo_answer.warnings
        assert "unknown job type 'resnet18'; did you mean 'ResNet-18 (batch size" in unknown
        assert "(`hctl info` lists the known job types)" in unknown
        assert "unknown GPU type 'vv100' (the cluster has v100); did you mean 'v100'?" in no_type
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # its only type a typo: it would never run
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpu_types=["vv100"])))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown GPU type 'vv100'; did you mean 'v100'?" in (refused.value.details() or "")
        good = spec(job_type="ResNet-18 (batch size 32)", gpu_types=["v100"])
        assert not (await stub.SubmitJob(cpb.SubmitJobRequest(spec=good))).warnings
        hinted = spec(job_type="my-model", hints=pb.ProfileHints(util_avg=40.0))
        assert not (await stub.SubmitJob(cpb.SubmitJobRequest(spec=hinted))).warnings  # hints stand in
        info = await stub.GetClusterInfo(cpb.GetClusterInfoRequest())
        assert list(info.gpu_types) == ["v100"] and "ResNet-18 (batch size 32)" in info.job_types
        await w.close()


async def test_a_drain_writes_a_log_line_and_stays_on_the_job(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="master.services.scheduler")
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1")
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        await w.run_next()
        assert not (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).last_preemption
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="n1", action=DRAIN))
        await m.scheduler.run_once()
        kill = await w.recv_kind("kill")
        assert kill.job_id == jid
        lines = [r.getMessage() for r in caplog.records if jid in r.getMessage()]
        assert f"job {jid} attempt 1 on n1 stopped and requeued: preempted: node n1 is drained" in lines
        m.clock.advance(5.0)  # type: ignore[attr-defined]
        await m.scheduler.run_once()  # a later pass rewrites the reason, not the last preemption
        job = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert job.last_preemption == "preempted: node n1 is drained" and job.last_preempted_at > 0
        await w.close()


async def test_reclaim_says_preempted_once(tmp_path: pathlib.Path) -> None:
    queues = queues_toml(
        queue_table("a", {"v100": 1}, borrowing_limit=1, users=("alice",)),
        queue_table("b", {"v100": 1}, users=("bob",)),
    )
    async with running_master(tmp_path, queues=queue_file(tmp_path, queues)) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        a1 = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        await w.run_next()
        m.clock.advance(1.0)  # type: ignore[attr-defined]
        a2 = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        await w.run_next()
        await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="bob")))
        kill = await w.recv_kind("kill")
        assert kill.job_id == a2 and kill.reason.count("preempted") == 1, kill.reason
        job = await stub.GetJob(cpb.GetJobRequest(job_id=a2))
        assert job.last_preemption.startswith("preempted: queue b reclaims its quota"), job.last_preemption
        assert a1 != a2
        await w.close()


async def test_jobs_that_ended_recently_are_listed_with_the_active_ones(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1")
        await w.connect()
        old = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        await w.run_next()
        await w.update(old, 1, pb.JOB_STATE_FAILED, exit_code=1)
        await w.barrier()
        m.clock.advance(10.0)  # type: ignore[attr-defined]
        fast = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        await w.run_next()
        await w.update(fast, 1, pb.JOB_STATE_FAILED, exit_code=1)  # fails at once
        await w.barrier()
        waiting = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2)))).job.id
        active = [pb.JOB_STATE_PENDING, pb.JOB_STATE_ASSIGNED, pb.JOB_STATE_RUNNING]
        listed = await stub.ListJobs(cpb.ListJobsRequest(states=active, finished_within_s=5.0))
        assert [j.id for j in listed.jobs] == [fast, waiting]  # not the job that ended long ago
        plain = await stub.ListJobs(cpb.ListJobsRequest(states=active))
        assert [j.id for j in plain.jobs] == [waiting]
        await w.close()
