"""What a tier of a pass sees: the jobs an earlier tier placed on their GPUs of this pass, and
ledgers read once per pass, for every tier.

A queue tier's placements are shown to the next tier as ASSIGNED jobs. A placement that was
then dropped (the master refused it, a pass's transaction failed) leaves the job pending at
the same version, and the next pass may place it elsewhere: the next tier must see it there,
not where the dropped pass put it (the packer keeps the GPUs of active jobs by (id, version)).
"""

from __future__ import annotations

import dataclasses

from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobState, Node
from horus_core.policies import make_policy
from horus_core.policies.pack import PackingPolicy
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


R50, REC = "ResNet-50 (batch size 64)", "Recommendation (batch size 512)"


def _two_types() -> tuple[Node, ...]:
    return (
        Node("v", (Gpu("v0", "v", 0, "Tesla V100-SXM2-16GB", 16160, "v100"),)),
        Node("k", (Gpu("k0", "k", 0, "Tesla K80", 11441, "k80"),)),
    )


def test_a_gpu_type_tier_keeps_the_service_of_the_jobs_of_other_tiers() -> None:
    """ResNet-50 runs well only on V100s, Recommendation best on K80s: two type tiers. The
    least-attained-service ledger is read once per pass, so the jobs of one tier keep the
    service they attained while another tier is served (the ledger used to be read again for
    each tier, on a snapshot of that tier's jobs alone, and forgot the others' service)."""
    policy = make_policy("horus-las")
    assert isinstance(policy, PackingPolicy) and policy.las is not None
    old = [pending(f"old{i}", R50, at=float(i)) for i in range(3)]
    jobs = (pending("rec", REC), *old, pending("new", R50, at=10.0))
    policy.las.service = {j.id: 3 * 3600.0 for j in old}  # (they ran 3 h, then were stopped)
    actions = policy.decide(ClusterSnapshot(_two_types(), jobs), 100.0)
    assert _where(actions)[:2] == [("rec", ("k0",)), ("new", ("v0",))]  # the least served first
    assert dict(policy.las.service) == {j.id: 3 * 3600.0 for j in old}
