"""Scheduling: action checks (pure), transitions (pure) and passes driven by a fake clock."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from master_fakes import WAIT_S, FakeWorker, client_for, config, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.model import (
    Action,
    Assign,
    ClusterSnapshot,
    Gpu,
    Job,
    JobSpec,
    JobState,
    Node,
    Preempt,
    Wait,
)
from horus_core.policies.checks import check_actions
from horus_core.testing import FakeClock
from master.app import Master
from master.services import transitions as tr
from master.store.rows import JobRow


def gpu(i: int, node: str = "n1", healthy: bool = True) -> Gpu:
    return Gpu(f"g{node}{i}", node, i, "V100", 16384, "v100", healthy)


def job(
    jid: str,
    state: JobState = JobState.PENDING,
    gpus: tuple[str, ...] = (),
    n: int = 1,
    exclusive: bool = False,
    reason: str = "",
) -> Job:
    return Job(
        jid,
        JobSpec(command=("x",), gpus=n, exclusive=exclusive),
        state,
        attempt=1 if gpus else 0,
        node="n1" if gpus else "",
        gpus=gpus,
        reason=reason,
    )


def snap(*jobs: Job) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=(Node("n1", (gpu(0), gpu(1), gpu(2, healthy=False))),), jobs=jobs)


def test_invalid_actions_are_dropped() -> None:
    s = snap(
        job("a"),
        job("b", n=2),
        job("c"),
        job("r", JobState.RUNNING, ("gn10",), exclusive=True),
        job("w", reason="same"),
    )
    plan = check_actions(
        s,
        [
            Assign("a", "n2", ("gn10",)),  # unknown node
            Assign("a", "n1", ("gn10",)),  # exclusive resident
            Assign("a", "n1", ("gn12",)),  # unhealthy GPU
            Assign("a", "n1", ("nope",)),  # not a GPU of n1
            Assign("b", "n1", ("gn11",)),  # too few GPUs
            Assign("b", "n1", ("gn11", "gn11")),  # not distinct
            Assign("c", "n1", ("gn11",), predicted_slowdown=float("nan")),
            Assign("c", "n1", ("gn11",)),  # second action for c
            Assign("r", "n1", ("gn11",)),  # not pending
            Preempt("a", "why"),  # not active
            Wait("w", "same"),  # unchanged reason: nothing to write
            Wait("zzz", "unknown job"),
        ],
    )
    assert [a.job_id for a in plan.assigns] == ["c"] and plan.assigns[0].predicted_slowdown == 1.0
    assert plan.preempts == [] and plan.waits == [] and len(plan.dropped) == 10


def test_sharing_limits_and_preempt_frees() -> None:
    s = snap(
        job("a"),
        job("b"),
        job("c"),
        job("d"),
        job("x", exclusive=True),
        job("r", JobState.RUNNING, ("gn10",), exclusive=True),
    )
    plan = check_actions(
        s,
        [
            Preempt("r", "make room"),
            Assign("a", "n1", ("gn10",)),
            Assign("b", "n1", ("gn10",)),
            Assign("c", "n1", ("gn10",)),
            Assign("d", "n1", ("gn10",)),  # a fourth job on one GPU
            Assign("x", "n1", ("gn10",)),  # exclusive onto a shared GPU
        ],
    )
    assert [p.job_id for p in plan.preempts] == ["r"]
    assert [a.job_id for a in plan.assigns] == ["a", "b", "c"] and len(plan.dropped) == 2


def row(j: Job, cancel: bool = False) -> JobRow:
    return JobRow(j, cancel_requested=cancel)


def test_worker_update_transitions() -> None:
    running = Job("j", JobSpec(command=("x",)), JobState.RUNNING, attempt=2, node="n1", gpus=("g",))
    v = tr.UpdateVerdict()
    done = tr.worker_update("n1", 2, JobState.SUCCEEDED, 0, "", 5.0, v)(row(running))
    assert done is not None and done.job.state is JobState.SUCCEEDED
    assert done.job.finished_at == 5.0 and v.ended
    # duplicate final on a terminal job: no change
    assert tr.worker_update("n1", 2, JobState.SUCCEEDED, 0, "", 6.0, tr.UpdateVerdict())(done) is None
    # an old attempt, or another node, saying RUNNING gets killed
    for node, attempt in (("n1", 1), ("n2", 2)):
        v = tr.UpdateVerdict()
        assert tr.worker_update(node, attempt, JobState.RUNNING, None, "", 6.0, v)(row(running)) is None
        assert v.kill
    # CANCELLED without a cancel request: the attempt is re-queued; with one: CANCELLED
    again = tr.worker_update("n1", 2, JobState.CANCELLED, None, "lease expired", 7.0, tr.UpdateVerdict())
    requeued = again(row(running))
    assert requeued is not None and requeued.job.state is JobState.PENDING
    assert requeued.job.reason == "attempt 2 lease expired"
    cancelled = again(row(running, cancel=True))
    assert cancelled is not None and cancelled.job.state is JobState.CANCELLED
    assert not cancelled.cancel_requested
    # a re-queued attempt that really finished still counts
    late = tr.worker_update("n1", 2, JobState.FAILED, 3, "", 8.0, tr.UpdateVerdict())(requeued)
    assert late is not None and late.job.state is JobState.FAILED and late.job.exit_code == 3


def test_assign_and_requeue_transitions() -> None:
    pending = Job("j", JobSpec(command=("x",)), JobState.PENDING, attempt=1, node="old")
    a = tr.assign("n1", ("g0",), 0.8, 3.0)(row(pending))
    assert a is not None and (a.job.state, a.job.attempt, a.job.node, a.job.predicted_slowdown) == (
        JobState.ASSIGNED,
        2,
        "n1",
        0.8,
    )
    assert tr.assign("n1", ("g0",), 1.0, 3.0)(a) is None  # no longer pending
    lost = tr.requeue("attempt {attempt} lost: node {node} lost", 4.0, node="n1", attempt=2)(a)
    assert lost is not None and lost.job.reason == "attempt 2 lost: node n1 lost"
    assert tr.requeue("x", 4.0, node="n2")(a) is None


@dataclass
class Phased:
    """A policy the test steers: 'assign' places pending jobs on GPU-n1-0, 'preempt' stops active
    ones, 'idle' does nothing. Deterministic per snapshot, so extra passes are harmless."""

    name: str = "phased"
    phase: str = "idle"
    seen: list[ClusterSnapshot] = field(default_factory=list)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        self.seen.append(snapshot)
        if self.phase == "assign":
            return [Assign(j.id, "n1", ("GPU-n1-0",), 0.9) for j in snapshot.pending()[:1]]
        if self.phase == "preempt":
            return [Preempt(j.id, "round over") for j in snapshot.active()]
        return []


@asynccontextmanager
async def _preempted(
    tmp_path: pathlib.Path,
) -> AsyncIterator[tuple[Master, cgrpc.HorusServiceAsyncStub, FakeWorker, Phased, str]]:
    """A job's attempt 1 on n1, preempted by the policy, its worker still reporting it running
    (checkpointing): the master holds the next attempt. The policy would place it again."""
    policy = Phased()
    async with Master(config(tmp_path), clock=FakeClock(), policy=policy) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        policy.phase = "assign"
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        a = await w.recv_kind("assign")
        assert (a.job_id, a.attempt) == (jid, 1)
        policy.phase = "preempt"
        m.core.wakeup.poke()
        kill = await w.recv_kind("kill")
        assert (kill.job_id, kill.attempt, kill.reason) == (jid, 1, "preempted: round over")
        got = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert got.state == pb.JOB_STATE_PENDING and got.attempt == 1 and got.predicted_slowdown == 0.9
        policy.phase = "assign"
        await w.heartbeat(running=((jid, 1),))  # the old attempt still stops: nothing new starts
        m.core.wakeup.poke()
        await w.barrier()
        await m.scheduler.run_once()
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).attempt == 1
        yield m, stub, w, policy, jid
        await w.close()


async def test_preempt_then_reassign(tmp_path: pathlib.Path) -> None:
    async with _preempted(tmp_path) as (m, _, w, policy, _):
        await w.heartbeat(running=())  # stopped: the next attempt may start
        await w.barrier()  # (handled before the pass: else the pass still hides its GPU, and waits a tick)
        m.core.wakeup.poke()
        assert (await w.recv_kind("assign")).attempt == 2
        assert all(s.nodes[0].name == "n1" for s in policy.seen)


async def test_a_preempted_attempts_final_update_lets_the_next_one_start_at_once(
    tmp_path: pathlib.Path,
) -> None:
    """The worker's final update of a preempted attempt (sent once its process ended) frees its
    GPUs for the next attempt at once: no heartbeat, no tick (the fake clock never moves here)."""
    async with _preempted(tmp_path) as (_, _, w, _, jid):
        await w.update(jid, 2, pb.JOB_STATE_CANCELLED)  # not the stopping attempt: still held
        await w.update(jid, 1, pb.JOB_STATE_CANCELLED)  # its end: the job's next attempt starts
        assert (await w.expect("assign", jid)).attempt == 2


async def test_after_a_restart_a_requeued_attempt_holds_its_job_until_its_node_reports_it_ended(
    tmp_path: pathlib.Path,
) -> None:
    """The master restarts while a preempted attempt still checkpoints on n1. The new master
    cannot know it has not ended: the job's next attempt waits until n1 is back and reports it
    gone, though the other node has room (else the job could run twice at once)."""
    async with _preempted(tmp_path) as (_, _, _, _, jid):
        pass  # (the master stops with attempt 1 still running on n1)
    async with running_master(tmp_path) as m, client_for(m) as stub:  # (fifo: any free GPU)
        n2 = FakeWorker(m.port, "n2", n_gpus=1)
        await n2.connect()
        await m.scheduler.run_once()
        await n2.barrier()
        assert not [msg for msg in n2.skipped if msg.WhichOneof("msg") == "assign"]
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).attempt == 1

        n1 = FakeWorker(m.port, "n1", n_gpus=1)
        await n1.connect(running=((jid, 1),))  # back, still running it: told to stop again
        assert (await n1.expect("kill", jid)).attempt == 1
        await n1.heartbeat(running=((jid, 1),))
        await n1.barrier()
        await m.scheduler.run_once()
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).attempt == 1

        await n1.heartbeat()  # it ended: the next attempt may start, on either node
        await n1.barrier()
        await m.scheduler.run_once()
        got = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
        assert (got.state, got.attempt) == (pb.JOB_STATE_ASSIGNED, 2)
        await n1.close()
        await n2.close()


async def test_ticks_follow_the_fake_clock(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    async with running_master(tmp_path, clock, node_timeout_s=5.0, lease_s=3.0) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        await w.recv_kind("assign")  # the submission poked a pass
        call = stub.WatchJobs(cpb.WatchJobsRequest(job_id=jid))
        await call.initial_metadata()
        clock.advance(6.0)  # the loop's tick fires: liveness declares n1 lost, the job is re-queued
        async with asyncio.timeout(WAIT_S):
            ev = await call.read()
        assert ev.job.state == pb.JOB_STATE_PENDING and "node n1 lost" in ev.job.reason
        call.cancel()
        await w.close()


async def test_waiting_reasons(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id
        await m.scheduler.run_once()
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).reason == "no ready nodes"
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()  # the registration pokes a pass: jid gets the only GPU
        assert (await w.recv_kind("assign")).job_id == jid
        late = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=1)))).job.id
        await m.scheduler.run_once()
        got = await stub.GetJob(cpb.GetJobRequest(job_id=late))
        assert got.state == pb.JOB_STATE_PENDING and "free GPU" in got.reason
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=jid))).state == pb.JOB_STATE_ASSIGNED
        await w.close()
