"""The changes the live index hands out with each pass's snapshot (``JobChanges``), and the
policy ledgers that follow them instead of walking every live job: after random submissions,
placements, starts, preemptions, ends, reason changes, passes a policy did not see and index
rebuilds, a policy fed the changes holds exactly the ledgers of one that looks at every job,
and both decide what the plain per-job oracle decides: the book of each follows one path
(a walk is every live job as changed, and every job it holds that is gone as gone)."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.interference import default_model
from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node
from horus_core.policies import make_policy
from horus_core.policies.backfill import GangReserve
from horus_core.policies.pack import PackingPolicy
from horus_core.testing.plain_packer import PlainPacker
from master.store.live import LiveIndex
from master.store.rows import JobRow

NODES = tuple(
    Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100-SXM2-16GB", 16160, "v100") for k in range(4)))
    for i in range(3)
)
MODEL = default_model()
TYPES = MODEL.known_job_types()


def ledgers(policy: object) -> tuple[object, ...]:
    """What a policy keeps across passes: its book's records and gang queue, the reservation's
    credited steps and holder, the attained service and its running stints."""
    assert isinstance(policy, PackingPolicy) and policy.las is not None
    r, las, book = policy.gate.reserve, policy.las, policy.book
    assert isinstance(r, GangReserve)
    stints = {i: (s.job, s.since, s.running, s.placed) for i, s in book.stints.items()}
    cols = las.columns
    running = {i: (cols.begun[s], cols.width[s]) for i, s in cols.slots.items() if cols.running[s]}
    return (stints, sorted(book.gangs), book.last, r.steps, r.held, las.last, dict(las.service), running)


class World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.index = LiveIndex()
        self.rows: dict[str, JobRow] = {}  # the live rows (what a rebuilt index loads)
        self.n = 0

    def put(self, job: Job) -> None:
        row = JobRow(replace(job, version=job.version + 1))
        self.index.update([row])
        if row.job.state in (JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING):
            self.rows[job.id] = row
        else:
            self.rows.pop(job.id, None)

    def pick(self, *states: JobState) -> Job | None:
        jobs = [r.job for r in self.rows.values() if r.job.state in states]
        return self.rng.choice(jobs) if jobs else None

    def step(self, now: float) -> None:
        what = self.rng.choice(["submit", "submit", "assign", "run", "preempt", "finish", "reason"])
        if what == "submit":
            self.n += 1
            gpus, steps = self.rng.choice([1, 1, 2, 4]), self.rng.choice([0, 1000, 50_000])
            spec = JobSpec(command=("x",), gpus=gpus, job_type=self.rng.choice(TYPES), total_steps=steps)
            self.put(Job(f"j{self.n:03d}", spec, JobState.PENDING, submitted_at=now, version=-1))
            return
        if what == "assign" and (job := self.pick(JobState.PENDING)) is not None:
            node = self.rng.choice(NODES)
            gpus = tuple(g.uuid for g in node.gpus[: job.spec.gpus])
            attempt = job.attempt + 1
            self.put(replace(job, state=JobState.ASSIGNED, attempt=attempt, node=node.name, gpus=gpus))
        elif what == "run" and (job := self.pick(JobState.ASSIGNED)) is not None:
            self.put(replace(job, state=JobState.RUNNING, started_at=now))
        elif what == "preempt" and (job := self.pick(JobState.ASSIGNED, JobState.RUNNING)) is not None:
            self.put(replace(job, state=JobState.PENDING, node="", gpus=(), reason="preempted"))
        elif what == "finish" and (job := self.pick(JobState.ASSIGNED, JobState.RUNNING)) is not None:
            self.put(replace(job, state=self.rng.choice([JobState.SUCCEEDED, JobState.FAILED])))
        elif what == "reason" and (job := self.pick(JobState.PENDING)) is not None:
            self.put(replace(job, reason=f"waits {self.rng.random():.3f}"))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_policy_fed_the_changes_keeps_the_ledgers_of_one_that_looks_at_every_job(seed: int) -> None:
    rng = random.Random(seed)
    world = World(rng)
    fed, walks, plain = make_policy("horus", MODEL), make_policy("horus", MODEL), make_policy("horus", MODEL)
    plain.packer = PlainPacker()  # type: ignore[attr-defined]  # (the per-job oracle)
    now, incremental = 1000.0, 0
    for _ in range(40):
        for _ in range(rng.randint(0, 6)):
            world.step(now)
        if rng.random() < 0.1:  # a restarted master: a new index, loaded from the rows
            world.index = LiveIndex(world.rows.values())
        index = world.index
        changes = index.handout()
        jobs, split = index.jobs(), index.split()
        if rng.random() < 0.1:
            continue  # a pass the fed policy never sees: its next changes do not follow on
        incremental += changes.since(*fed.book._seen) is not None  # type: ignore[attr-defined]
        a = fed.decide(ClusterSnapshot.split_as(NODES, jobs, split, changes), now)
        b = walks.decide(ClusterSnapshot(NODES, jobs), now)
        assert a == b == plain.decide(ClusterSnapshot(NODES, jobs), now)
        assert ledgers(fed) == ledgers(walks)
        now += rng.choice([0.0, 30.0, 600.0, 4000.0])
    assert incremental > 0  # (the changes were used, not only the walk)


def test_the_changes_name_what_changed_since_the_last_handout() -> None:
    spec = JobSpec(command=("x",))
    index = LiveIndex([JobRow(Job("a", spec, JobState.PENDING)), JobRow(Job("b", spec, JobState.PENDING))])
    first = index.handout()
    assert set(first.jobs) == {"a", "b"} and first.since("", -1) is None
    index.update([JobRow(Job("a", spec, JobState.ASSIGNED, attempt=1, node="n", gpus=("g",), version=1))])
    index.update([JobRow(Job("b", spec, JobState.CANCELLED, version=1))])
    index.update([JobRow(Job("a", spec, JobState.PENDING, version=0))])  # stale: not a change
    second = index.handout()
    changed = second.since(first.source, first.epoch)
    assert changed is not None and set(changed) == {"a", "b"}
    assert changed["b"] is None and changed["a"] is index.find("a")
    assert second.since(second.source, second.epoch) == {}  # (the same snapshot again)
    assert second.since(first.source, first.epoch - 1) is None  # a snapshot skipped: look at all
    assert LiveIndex().handout().since(first.source, second.epoch) is None  # another index
