"""Queues on a live master (real gRPC, real SQLite, fake clock): submit checks, reclaim, usage, reload."""

from __future__ import annotations

import asyncio
import math
import pathlib
import threading

import grpc
import pytest
from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import Action, ClusterSnapshot
from horus_core.queues import QueuedPolicy
from horus_core.testing import queue_file, queue_table, queues_toml
from tests.pgtest import Db

QUEUES = queues_toml(
    queue_table("a", {"v100": 1}, borrowing_limit=1, users=("alice",)),
    queue_table("b", {"v100": 1}, users=("bob",)),
)


async def test_submit_checks_queue_user_and_class(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, queues=queue_file(tmp_path, QUEUES)) as m, client_for(m) as stub:
        for bad, words in (
            (spec(owner="alice", queue="nope"), "unknown queue 'nope'"),
            (spec(owner="alice", queue="b"), "may not submit to queue 'b'"),
            (spec(owner="bob", priority_class="urgent"), "unknown priority class 'urgent'"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.SubmitJob(cpb.SubmitJobRequest(spec=bad))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert words in (err.value.details() or "")
        assert not (await stub.ListJobs(cpb.ListJobsRequest())).jobs  # nothing stored
        ok = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="bob", grace_s=45.0)))).job
        stored = await stub.GetJob(cpb.GetJobRequest(job_id=ok.id))  # read back from SQLite
        assert stored.spec.queue == "b"  # the user's default queue, stored with the job
        assert (stored.spec.priority_class, stored.spec.grace_s) == ("", 45.0)


async def test_owner_reclaims_borrowed_gpu_and_usage_shows_it(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, queues=queue_file(tmp_path, QUEUES)) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        a1 = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        assert (await w.recv_kind("assign")).job_id == a1
        m.clock.advance(1.0)  # type: ignore[attr-defined]
        a2 = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        assert (await w.recv_kind("assign")).job_id == a2  # borrowed: b's idle GPU
        await w.update(a1, 1, pb.JOB_STATE_RUNNING)
        await w.update(a2, 1, pb.JOB_STATE_RUNNING)
        await w.barrier()
        usage = {q.name: q for q in (await stub.ListQueueUsage(cpb.ListQueueUsageRequest())).queues}
        assert (usage["a"].used, usage["a"].borrowed, usage["b"].used) == (2, 1, 0)
        b1 = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="bob")))).job.id
        kill = await w.recv_kind("kill")
        assert (kill.job_id, kill.attempt) == (a2, 1) and "queue b reclaims" in kill.reason
        got = await stub.GetJob(cpb.GetJobRequest(job_id=b1))
        assert got.state == pb.JOB_STATE_PENDING and "reclaims" in got.reason
        await w.heartbeat(running=((a1, 1), (a2, 1)))  # a2 still stops: its GPU goes to no one
        await w.barrier()
        await m.scheduler.run_once()
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=b1))).state == pb.JOB_STATE_PENDING
        await w.update(a2, 1, pb.JOB_STATE_CANCELLED, exit_code=143)
        await w.heartbeat(running=((a1, 1),))
        await w.barrier()
        m.core.wakeup.poke()
        assert (await w.recv_kind("assign")).job_id == b1
        back = await stub.GetJob(cpb.GetJobRequest(job_id=a2))
        assert back.state == pb.JOB_STATE_PENDING and back.attempt == 1  # re-queued, not failed
        usage = {q.name: q for q in (await stub.ListQueueUsage(cpb.ListQueueUsageRequest())).queues}
        assert (usage["a"].used, usage["a"].pending, usage["b"].used) == (1, 1, 1)
        await w.close()


async def test_reload_keeps_the_old_config_when_the_file_is_bad(tmp_path: pathlib.Path) -> None:
    path = queue_file(tmp_path, QUEUES)
    async with running_master(tmp_path, queues=path) as m, client_for(m) as stub:
        path.write_text("[queues.a\n")
        assert await m.reload_queues() is False
        assert [q.name for q in (await stub.ListQueueUsage(cpb.ListQueueUsageRequest())).queues] == ["a", "b"]
        path.write_text(QUEUES + queue_table("c", {"*": 2}))
        assert await m.reload_queues() is True
        names = [q.name for q in (await stub.ListQueueUsage(cpb.ListQueueUsageRequest())).queues]
        assert names == ["a", "b", "c"]


async def test_a_reload_waits_for_the_pass_in_progress(tmp_path: pathlib.Path) -> None:
    """(Issue 39 defect 5: SIGHUP swapped the config while ``decide`` ran in its thread, so one
    pass could mix two.) A pass that started with the old file ends with it; the new one is in
    force right after."""
    path = queue_file(tmp_path, QUEUES)
    async with running_master(tmp_path, queues=path) as m:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        policy = m.policy
        assert isinstance(policy, QueuedPolicy)
        started, release = threading.Event(), threading.Event()
        seen: list[object] = []
        decide = policy.decide

        def slow(snapshot: ClusterSnapshot, now: float) -> list[Action]:
            seen.append(policy.config)
            started.set()
            release.wait(10.0)
            seen.append(policy.config)
            return decide(snapshot, now)

        policy.decide = slow  # type: ignore[method-assign]
        one_pass = asyncio.create_task(m.scheduler.run_once())
        assert await asyncio.to_thread(started.wait, 10.0)
        path.write_text(QUEUES + queue_table("c", {"*": 2}))
        reload = asyncio.ensure_future(m.reload_queues())
        await asyncio.sleep(0.1)  # (the reload had every chance to swap the config now)
        release.set()
        await one_pass
        assert await reload is True
        assert seen[0] is seen[1], "a pass decided with two configurations"
        assert sorted(policy.config.queues) == ["a", "b", "c"]
        await w.close()


async def test_without_queues_the_rpc_says_so(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        answer = await stub.ListQueueUsage(cpb.ListQueueUsageRequest())
        assert not answer.configured and not answer.queues
        assert await m.reload_queues() is False


async def test_job_metrics_carry_the_jobs_queue(tmp_path: pathlib.Path) -> None:
    from master_fakes import config
    from test_metrics import scrape

    from horus_core.testing import FakeClock
    from master.app import Master

    master = Master(
        config(tmp_path, queues=queue_file(tmp_path, QUEUES)), clock=FakeClock(), metrics_listen="127.0.0.1:0"
    )
    async with master as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="bob")))).job.id
        a = await w.recv_kind("assign")
        usage = [
            pb.JobGpuStats(job_id=jid, attempt=1, gpu_uuid=w.gpus[0].uuid, util_sm=40.0, mem_used_mib=100)
        ]
        stats = [
            pb.GpuStats(
                uuid=w.gpus[0].uuid, util_sm=40.0, mem_used_mib=100, mem_total_mib=16384, healthy=True
            )
        ]
        await w.update(jid, a.attempt, pb.JOB_STATE_RUNNING)
        await w.heartbeat(running=((jid, 1),), gpus=stats, jobs=usage)
        await w.barrier()
        got = await scrape(m.http.metrics_port)
        [row] = [s for s in got["horus_job_gpu_utilization"] if s.labels["job"] == jid]
        assert (row.labels["queue"], row.labels["user"]) == ("b", "bob")
        await w.close()


SHARED = queues_toml(queue_table("a", {"v100": 1}, users=("alice", "carol")), classes=False, half_life_s=1000)


async def test_restart_rebuilds_fair_share_usage_from_the_attempts(tmp_path: pathlib.Path) -> None:
    from horus_core.testing import FakeClock

    clock, path = FakeClock(), queue_file(tmp_path, SHARED)
    # (the fake clock jumps 300 s while the worker is silent: leases long enough to outlast it)
    slow = {"lease_s": 1000.0, "node_timeout_s": 2000.0}
    async with running_master(tmp_path, clock=clock, queues=path, **slow) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        a = await w.run_next()
        assert a.job_id == jid
        start = clock.now()
        clock.advance(300.0)
        await w.update(jid, a.attempt, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
        end = clock.now()
        await w.close()
    clock.advance(200.0)
    async with running_master(tmp_path, clock=clock, queues=path, **slow) as m, client_for(m) as stub:
        now, h = clock.now(), 1000.0
        want = h / math.log(2) * (2 ** (-(now - end) / h) - 2 ** (-(now - start) / h))
        assert m.policy.fair.usage[("a", "alice")] == pytest.approx(want, rel=1e-9)  # type: ignore[attr-defined]
        first = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        clock.advance(1.0)
        second = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="carol")))).job.id
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        # alice used her share before the restart: carol's later job goes first
        assert (await w.recv_kind("assign")).job_id == second
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=first))).state == pb.JOB_STATE_PENDING
        await w.close()


async def test_restart_rebuilds_the_wrapped_policys_attained_service(tmp_path: pathlib.Path, db: Db) -> None:
    from horus_core.policies.attained import Attained
    from horus_core.testing import FakeClock

    clock, path = FakeClock(), queue_file(tmp_path, SHARED)
    url = db.target if db.pg else ""  # (on both backends: the fair-share spans' SQL differs)
    async with (
        running_master(tmp_path, clock=clock, queues=path, policy="horus", db_url=url) as m,
        client_for(m) as stub,
    ):
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="alice")))).job.id
        a = await w.run_next()
        assert a.job_id == jid
        clock.advance(600.0)
        await w.crash()
    async with running_master(tmp_path, clock=clock, queues=path, policy="horus", db_url=url) as m:
        las = getattr(getattr(m.policy, "inner", None), "las", None)  # horus inside the queue wrapper
        assert isinstance(las, Attained) and las.service[jid] == pytest.approx(600.0)
