"""What a tier of a pass sees of the jobs an earlier tier placed: their GPUs of this pass.

A queue tier's placements are shown to the next tier as ASSIGNED jobs. A placement that was
then dropped (the master refused it, a pass's transaction failed) leaves the job pending at
the same version, and the next pass may place it elsewhere: the next tier must see it there,
not where the dropped pass put it (the packer keeps the GPUs of active jobs by (id, version)).
"""

from __future__ import annotations

import dataclasses

from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState
from horus_core.policies import make_policy
from horus_core.queues import QueuedPolicy
from horus_core.testing import nodes, pending, queue_config, queue_table, queues_toml

RN = "ResNet-18 (batch size 32)"
CFG = queues_toml(
    queue_table("a", {"v100": 1}, borrowing_limit=1, users=("alice",)),
    queue_table("b", {"v100": 1}, users=("bob",)),
)


def _job(jid: str, owner: str, *, at: float = 0.0, exclusive: bool = False) -> Job:
    job = pending(jid, RN, at=at, exclusive=exclusive)
    return dataclasses.replace(job, spec=dataclasses.replace(job.spec, owner=owner))


def _where(actions: list[Action]) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.job_id, a.gpus if isinstance(a, Assign) else ()) for a in actions]


def test_a_tier_sees_the_gpus_an_earlier_tier_placed_a_job_on_this_pass() -> None:
    cluster = nodes(1, 3)
    a, b = _job("a", "alice"), _job("b", "alice", at=1.0)  # a within the quota, b borrowing
    x = _job("x", "bob", exclusive=True)
    x = dataclasses.replace(x, state=JobState.RUNNING, node="n0", gpus=("n0g0",), attempt=1, version=1)
    second = ClusterSnapshot(cluster, (x, a, b))  # a cannot go where the first pass put it
    used = QueuedPolicy(make_policy("horus-util"), queue_config(CFG))
    first = used.decide(ClusterSnapshot(cluster, (a, b)), 0.0)
    assert _where(first) == [("a", ("n0g0",)), ("b", ("n0g1",))]
    # (the first pass's actions are dropped: a and b stay pending at their versions)
    fresh = QueuedPolicy(make_policy("horus-util"), queue_config(CFG))
    expected = fresh.decide(second, 0.0)
    assert _where(expected) == [("a", ("n0g1",)), ("b", ("n0g2",))]
    assert used.decide(second, 0.0) == expected
