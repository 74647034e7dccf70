"""The packer's Waits: last pass's object where a job's reason is the same sentence object and its
code equal, else a new Wait (``Packer._actions``)."""

from __future__ import annotations

from horus_core.model import ClusterSnapshot, Wait
from horus_core.policies import make_policy
from horus_core.testing import nodes, pending


def test_a_second_pass_over_the_same_queue_hands_back_the_same_waits() -> None:
    policy = make_policy("horus", None)
    jobs = tuple(pending(f"j{i}", "resnet50", gpus=8, at=float(i)) for i in range(6))
    snapshot = ClusterSnapshot(nodes(1, 8), jobs)  # room for one of the six
    first = [a for a in policy.decide(snapshot, 0.0) if isinstance(a, Wait)]
    second = [a for a in policy.decide(snapshot, 1.0) if isinstance(a, Wait)]
    assert len(first) == 5 and [w.job_id for w in second] == [w.job_id for w in first]
    assert all(a is b for a, b in zip(first, second, strict=True))


def test_a_wait_whose_reason_changed_is_a_new_one() -> None:
    policy = make_policy("horus", None)
    jobs = tuple(pending(f"j{i}", "resnet50", gpus=8, at=float(i)) for i in range(3))
    first = {
        a.job_id: a for a in policy.decide(ClusterSnapshot(nodes(1, 8), jobs), 0.0) if isinstance(a, Wait)
    }
    bigger = ClusterSnapshot(nodes(1, 8), (*jobs, pending("j9", "resnet50", gpus=16, at=9.0)))
    again = {a.job_id: a for a in policy.decide(bigger, 1.0) if isinstance(a, Wait)}
    assert set(first) == {"j1", "j2"} and again["j1"] is first["j1"] and again["j2"] is first["j2"]
    gone = ClusterSnapshot((), jobs)  # no node: every reason changes
    last = [a for a in policy.decide(gone, 2.0) if isinstance(a, Wait)]
    assert {w.job_id for w in last} == {"j0", "j1", "j2"}
    assert all(w is not first.get(w.job_id) and w.reason != first["j1"].reason for w in last)
