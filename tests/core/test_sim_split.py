"""The simulator hands each round's snapshot its pending, active and running jobs and their
numbers and versions (horus_core/sim/split.py), as the master's live index does. They must be
exactly what the snapshot would compute from its jobs: checked every round of runs where jobs
are stopped and re-queued behind later ones, evicted, and started out of arrival order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from horus_core.inorder import RUN, InOrder
from horus_core.interference import default_model
from horus_core.model import ClusterSnapshot, Job, JobSpec, JobState
from horus_core.policies import make_policy
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster

R50, R18 = "ResNet-50 (batch size 64)", "ResNet-18 (batch size 32)"
JOBS = [
    TraceJob(R50 if i % 2 else R18, 4 if i % 5 == 0 else 1 + i % 2, 300_000 * (1 + i % 7), 120.0 * i)
    for i in range(40)
]

SPEC = JobSpec(command=("true",), gpus=1)


@pytest.mark.parametrize(
    "name, config", [("horus", {}), ("horus", {"elastic": 0.5}), ("gandiva", {}), ("fifo", {})]
)
def test_each_rounds_split_numbers_and_versions_are_the_snapshots_own(
    name: str, config: dict[str, Any]
) -> None:
    policy = make_policy(name, default_model())
    sim = Simulator(JOBS, build_cluster("v100:8"), policy, default_model(), SimConfig(**config))
    decide, seen = policy.decide, {"rounds": 0, "behind": 0}

    def checked(snapshot: ClusterSnapshot, now: float) -> Any:
        fresh = ClusterSnapshot(snapshot.nodes, snapshot.jobs)  # (computes its own split)
        assert (snapshot.pending(), snapshot.active()) == (fresh.pending(), fresh.active())
        assert snapshot.running() == fresh.running()
        listed: list[Job] = [*fresh.pending(), *fresh.active()]
        changes = snapshot.changes
        assert changes is not None and changes.numbers is not None and changes.versions is not None
        assert changes.numbers.tolist() == [sim.by_id[j.id].idx for j in listed]
        assert changes.versions.tolist() == [j.version for j in listed]
        pending = [sim.by_id[j.id].idx for j in fresh.pending()]
        seen["rounds"] += 1
        seen["behind"] += any(sim.by_id[j.id].idx < max(pending) for j in fresh.active()) if pending else 0
        return decide(snapshot, now)

    policy.decide = checked  # type: ignore[method-assign]
    sim.run()
    assert sim.finished == len(JOBS) and seen["rounds"] > 50
    assert seen["behind"] > 0  # (some job started, or waited, out of arrival order)


@pytest.mark.parametrize("span", [400, 5 * RUN])  # (the second splits runs and empties them)
def test_in_order_keeps_numbers_sorted_through_any_joins_and_leaves(span: int) -> None:
    """The one ordered job list (horus_core/inorder.py), which the simulator and the master's
    live index both keep, against a dict sorted after every change."""
    rng = np.random.default_rng(3)
    kept, held = InOrder(), {}
    for step in range(3000):
        idx = int(rng.integers(0, span))
        if rng.random() < 0.55:
            view = Job(f"j{idx}", SPEC, JobState.PENDING, version=step)
            kept.put(idx, view)
            held[idx] = view
        else:
            kept.drop(idx)
            held.pop(idx, None)
        order = sorted(held)
        assert kept.numbers().tolist() == order and len(kept) == len(order)
        assert kept.jobs() == tuple(held[i] for i in order) and kept.ids() == [held[i].id for i in order]
        assert kept.versions().tolist() == [held[i].version for i in order]
