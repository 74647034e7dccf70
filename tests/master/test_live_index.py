"""The master's live-job index against the database: random submissions, scheduling passes,
worker updates over a real stream, cancels and master restarts on the same db file; after every
step the index holds exactly what a fresh read of the live rows gives."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import random
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from master_fakes import FakeWorker, config

from horus_core.gen import types_pb2 as pb
from horus_core.model import ClusterSnapshot, Job, JobSpec, JobState
from horus_core.testing import FakeClock
from master.app import Master
from master.config import MasterConfig
from master.store.live import LiveIndex
from master.store.rows import JobRow

FINALS = (pb.JOB_STATE_RUNNING, pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED)


def comparable(rows: list[JobRow]) -> list[tuple[Job, bool, str | None]]:
    """What the index must agree on (``seq`` is the database's own numbering)."""
    return [(r.job, r.cancel_requested, r.request_id) for r in rows]


class LiveIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.runner = asyncio.Runner()
        self.clock = FakeClock(1_700_000_000.123456789)  # more digits than SQLite's JSON keeps
        self.master: Master | None = None
        self.worker: FakeWorker | None = None
        self.submitted = 0
        self.runner.run(self._start())

    async def _open(self, cfg: MasterConfig) -> None:
        """A master whose passes run only when a rule asks (its own loop would race the checks)."""
        self.master = await Master(cfg, clock=self.clock).__aenter__()
        task = self.master._loop_task
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _start(self) -> None:
        await self._open(config(pathlib.Path(self.tmp.name), node_timeout_s=1e9, policy="horus"))
        self.worker = FakeWorker(self.master.port, "n1", n_gpus=4)
        await self.worker.connect()
        await self.worker.barrier()

    async def _stop(self) -> None:
        if self.worker is not None:
            await self.worker.crash()
        if self.master is not None:
            await self.master.__aexit__(None, None, None)
        self.master = self.worker = None

    def teardown(self) -> None:
        self.runner.run(self._stop())
        self.runner.close()
        self.tmp.cleanup()

    @property
    def m(self) -> Master:
        assert self.master is not None
        return self.master

    @rule(gpus=st.sampled_from([1, 1, 2, 4]), keyed=st.booleans(), floor=st.sampled_from([0.0, 0.0, 0.5]))
    def submit(self, gpus: int, keyed: bool, floor: float) -> None:
        self.submitted += 1
        key = f"r{self.submitted % 3}" if keyed else ""  # a repeated key finds the first job
        spec = JobSpec(command=("x",), gpus=gpus, owner="t", min_speed=floor)
        self.runner.run(self.m.jobs.submit(spec, key, None))

    @rule()
    def schedule(self) -> None:
        self.runner.run(self.m.scheduler.run_once())

    @precondition(lambda self: self.master is not None and len(self.m.core.live.active_on("n1")) > 0)
    @rule(pick=st.integers(0, 63), state=st.sampled_from(FINALS), stale=st.booleans())
    def worker_update(self, pick: int, state: int, stale: bool) -> None:
        active = self.m.core.live.active_on("n1")
        job = active[pick % len(active)].job
        assert self.worker is not None
        attempt = job.attempt - 1 if stale else job.attempt
        self.runner.run(self._update(job.id, attempt, state))

    async def _update(self, job_id: str, attempt: int, state: int) -> None:
        assert self.worker is not None
        await self.worker.update(job_id, attempt, state)
        await self.worker.barrier()

    @precondition(lambda self: self.master is not None and len(self.m.core.live) > 0)
    @rule(pick=st.integers(0, 63))
    def cancel(self, pick: int) -> None:
        rows = self.m.core.live.rows()
        self.runner.run(self.m.jobs.cancel(rows[pick % len(rows)].job.id, "by test", None))

    @rule(pass_without_nodes=st.booleans())
    def restart(self, pass_without_nodes: bool) -> None:
        """A new master on the same file; the worker comes back having run nothing (its attempts
        are lost), maybe after a pass that saw no ready node."""
        self.runner.run(self._restart(pass_without_nodes))

    async def _restart(self, pass_without_nodes: bool) -> None:
        assert self.worker is not None
        await self.worker.crash()
        await self.m.__aexit__(None, None, None)
        await self._open(self.m.config)
        if pass_without_nodes:
            await self.m.scheduler.run_once()  # "no ready nodes" on every pending job
        self.worker = FakeWorker(self.m.port, "n1", n_gpus=4)
        await self.worker.connect()
        await self.worker.barrier()

    @invariant()
    def index_equals_the_database(self) -> None:
        if self.master is None:
            return
        stored = self.runner.run(self.m.store.read.live_jobs())
        assert comparable(self.m.core.live.rows()) == comparable(stored)
        assert self.m.core.live.jobs() == tuple(r.job for r in stored)
        walked = ClusterSnapshot((), tuple(r.job for r in stored))  # (the snapshot's own split)
        kept = self.m.core.live.split()
        assert kept["pending"] == walked.pending() and kept["active"] == walked.active()
        assert kept["running"] == walked.running()
        active = [r.job for r in stored if r.job.state.active]
        assert {r.job.id for r in self.m.core.live.active_on("n1")} == {j.id for j in active}
        assert self.m.core.live.floored() == any(j.spec.min_speed > 0.0 for j in active)
        for uuid in (g.uuid for g in self.worker.gpus if self.worker is not None):
            held = {j.id for j in active if uuid in j.gpus}
            assert {j.id for j in self.m.core.live.residents(uuid)} == held


LiveIndexMachine.TestCase.settings = settings(
    max_examples=8, stateful_step_count=14, deadline=None, suppress_health_check=list(HealthCheck)
)
test_live_index_matches_the_database = LiveIndexMachine.TestCase


def test_a_late_reply_never_rolls_a_job_back() -> None:
    spec = JobSpec(command=("x",))
    v0 = JobRow(Job("a", spec, JobState.PENDING))
    v1 = JobRow(Job("a", spec, JobState.ASSIGNED, attempt=1, node="n1", gpus=("g",), version=1))
    v2 = JobRow(Job("a", spec, JobState.SUCCEEDED, attempt=1, node="n1", gpus=("g",), version=2))
    index = LiveIndex([v0])
    index.update([v1, v0])
    assert index.rows() == [v1] and [r.job.id for r in index.active_on("n1")] == ["a"]
    index.update([v2, v1])
    assert index.rows() == [] and index.active_on("n1") == [] and index.jobs() == ()


def test_the_index_knows_whether_a_running_job_has_a_speed_floor() -> None:
    """(What lets the floor enforcer skip its reading round without a look at every job.)"""
    floored, plain = JobSpec(command=("x",), min_speed=0.5), JobSpec(command=("x",))
    index = LiveIndex(
        [JobRow(Job("a", floored, JobState.PENDING)), JobRow(Job("b", plain, JobState.PENDING))]
    )
    assert not index.floored()  # pending: no GPU to watch yet
    index.update([JobRow(Job("b", plain, JobState.RUNNING, attempt=1, node="n1", gpus=("g0",), version=1))])
    assert not index.floored()
    running = Job("a", floored, JobState.RUNNING, attempt=1, node="n1", gpus=("g1",), version=1)
    index.update([JobRow(running)])
    assert index.floored()
    index.update([JobRow(Job("a", floored, JobState.PENDING, attempt=1, version=2))])  # preempted
    assert not index.floored()
    index.update(
        [JobRow(Job("a", floored, JobState.ASSIGNED, attempt=2, node="n1", gpus=("g1",), version=3))]
    )
    index.update(
        [JobRow(Job("a", floored, JobState.SUCCEEDED, attempt=2, node="n1", gpus=("g1",), version=4))]
    )
    assert not index.floored()


def test_the_index_knows_which_running_jobs_share_a_gpu() -> None:
    """(The floor enforcer measures and watches only those.)"""
    spec = JobSpec(command=("x",))

    def on(jid: str, gpus: tuple[str, ...], version: int = 1) -> JobRow:
        return JobRow(Job(jid, spec, JobState.RUNNING, attempt=1, node="n1", gpus=gpus, version=version))

    index = LiveIndex(
        [on("a", ("g0", "g1")), on("b", ("g1",)), on("c", ("g2",)), JobRow(Job("d", spec, JobState.PENDING))]
    )
    assert index.sharing() == {"a", "b"}
    index.update([on("b", ("g2",), version=2)])  # (moved: now next to c)
    assert index.sharing() == {"b", "c"}
    index.update([JobRow(Job("c", spec, JobState.SUCCEEDED, attempt=1, node="n1", gpus=("g2",), version=2))])
    assert index.sharing() == set()


def test_the_split_keeps_each_class_in_arrival_order_whatever_order_jobs_move_in() -> None:
    """A job preempted back to the queue goes where it arrived, not to the end; the split is the
    one a snapshot computes from the index's jobs after every change (what a pass relies on)."""
    spec = JobSpec(command=("x",))

    def at(jid: str, state: JobState, version: int) -> JobRow:
        placed = state.active or state is JobState.SUCCEEDED
        return JobRow(Job(jid, spec, state, attempt=version, node="n1" if placed else "",
                          gpus=("g0",) if placed else (), version=version))  # fmt: skip

    index = LiveIndex([at(j, JobState.PENDING, 0) for j in "abcde"])
    steps = [
        at("d", JobState.ASSIGNED, 1), at("b", JobState.ASSIGNED, 1), at("d", JobState.RUNNING, 2),
        at("b", JobState.RUNNING, 2), at("a", JobState.ASSIGNED, 1), at("d", JobState.PENDING, 3),
        at("c", JobState.SUCCEEDED, 1), at("a", JobState.RUNNING, 2), at("f", JobState.PENDING, 0),
        at("b", JobState.PENDING, 3), at("a", JobState.SUCCEEDED, 3),
    ]  # fmt: skip
    for row in steps:
        index.update([row])
        walked, kept = ClusterSnapshot((), index.jobs()), index.split()
        assert kept["pending"] == walked.pending() and kept["active"] == walked.active()
        assert kept["running"] == walked.running() and index.active() == list(walked.active())
    assert [j.id for j in index.split()["pending"]] == ["b", "d", "e", "f"]


def test_the_split_stays_in_order_through_thousands_of_moves() -> None:
    """(Enough jobs that each class is kept in many runs, which split as they grow and go as
    they empty.)"""
    rng = random.Random(7)
    spec = JobSpec(command=("x",))
    index = LiveIndex()
    jobs: dict[str, Job] = {}
    for step in range(6000):
        if not jobs or rng.random() < 0.4:
            job = Job(f"j{step:05d}", spec, JobState.PENDING)
        else:
            old = rng.choice(list(jobs.values()))
            state = rng.choice([JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING, JobState.SUCCEEDED])
            job = dataclasses.replace(old, state=state, version=old.version + 1)
        index.update([JobRow(job)])
        if job.state is JobState.SUCCEEDED:
            jobs.pop(job.id)
        else:
            jobs[job.id] = job
        if step % 500 == 499:
            walked, kept = ClusterSnapshot((), index.jobs()), index.split()
            assert kept["pending"] == walked.pending() and kept["active"] == walked.active()
            assert kept["running"] == walked.running() and len(index.jobs()) == len(jobs)
    assert max(len(g) for g in index.split().values()) > 600  # (more than two runs' worth)
