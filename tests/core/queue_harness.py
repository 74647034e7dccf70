"""A tiny pure cluster for queue tests: applies a policy's actions to jobs, as the master would."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobSpec, JobState, Node, Preempt, Wait
from horus_core.policies.base import Policy
from horus_core.testing import placed, requeued


def job(
    jid: str,
    owner: str,
    gpus: int = 1,
    *,
    queue: str = "",
    cls: str = "",
    at: float = 0.0,
    exclusive: bool = True,
) -> Job:
    spec = JobSpec(("train",), gpus=gpus, owner=owner, queue=queue, priority_class=cls, exclusive=exclusive)
    return Job(jid, spec, JobState.PENDING, submitted_at=at)


@dataclass
class Cluster:
    nodes: tuple[Node, ...]
    policy: Policy
    jobs: dict[str, Job] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    preempted: list[tuple[str, float]] = field(default_factory=list)  # (job, when)
    ran_for: list[float] = field(default_factory=list)  # how long each preempted attempt had run
    waits: dict[str, Wait] = field(default_factory=dict)
    now: float = 0.0

    def submit(self, *jobs: Job) -> None:
        for j in jobs:
            self.jobs[j.id] = dataclasses.replace(j, submitted_at=self.now)

    def finish(self, jid: str) -> None:
        self.jobs.pop(jid)
        self.done.add(jid)

    def step(self, dt: float = 1.0) -> list[Action]:
        """One scheduling pass at ``now``, its actions applied, then ``dt`` seconds pass."""
        actions = self.policy.decide(ClusterSnapshot(self.nodes, tuple(self.jobs.values())), self.now)
        for a in actions:
            self.apply(a)
        self.now += dt
        return actions

    def apply(self, a: Action) -> None:
        j = self.jobs[a.job_id]
        if isinstance(a, Assign):
            assert j.state is JobState.PENDING
            self.jobs[j.id] = placed(j, a, self.now)
        elif isinstance(a, Preempt):
            assert j.state.active
            self.preempted.append((j.id, self.now))
            self.ran_for.append(self.now - (j.started_at or 0.0))
            self.jobs[j.id] = requeued(j)
        else:
            self.waits[j.id] = a

    def running(self, owner: str = "") -> list[Job]:
        return [j for j in self.jobs.values() if j.state.active and (not owner or j.spec.owner == owner)]
