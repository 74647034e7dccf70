"""The action checks' Wait handling (its inline path): what is kept, what is dropped, and which
Waits count as a changed reason."""

from __future__ import annotations

import dataclasses

from horus_core.model import Action, Assign, ClusterSnapshot, Preempt, Wait
from horus_core.policies.checks import check_actions
from horus_core.testing import nodes, pending, running


def snapshot() -> ClusterSnapshot:
    waiting = dataclasses.replace(pending("a"), reason="no room")
    return ClusterSnapshot(nodes(1, 2), (waiting, pending("b"), running("r", "x", ("n0g0",))))


def test_a_wait_is_kept_and_listed_only_when_its_reason_changes() -> None:
    plan = check_actions(snapshot(), [Wait("a", "no room"), Wait("b", "behind a")])
    assert plan.n_waits == 2 and plan.waits == [Wait("b", "behind a")] and not plan.dropped


def test_waits_for_unknown_running_or_already_acted_jobs_are_dropped() -> None:
    actions: list[Action] = [
        Wait("ghost", "?"),
        Wait("r", "?"),
        Assign("b", "n0", ("n0g1",), 1.0),
        Wait("b", "again"),
        Wait("a", "first"),
        Wait("a", "second"),
    ]
    plan = check_actions(snapshot(), actions)
    why = [reason for _, reason in plan.dropped]
    assert why == [
        "unknown job",
        "job is RUNNING, not PENDING",
        "a second action for the same job",
        "a second action for the same job",
    ]
    assert plan.n_waits == 1 and plan.waits == [Wait("a", "first")]
    assert [a.job_id for a in plan.assigns] == ["b"]


def test_a_preempt_after_a_wait_for_the_same_job_is_dropped() -> None:
    plan = check_actions(snapshot(), [Wait("a", "no room"), Preempt("a", "x")])
    assert plan.n_waits == 1 and [r for _, r in plan.dropped] == ["a second action for the same job"]
