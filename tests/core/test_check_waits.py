"""The action checks' Wait handling (its inline path): what is kept, what is dropped, and which
Waits count as a changed reason."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.model import Action, Assign, ClusterSnapshot, Preempt, Wait
from horus_core.policies.checks import Plan, SnapshotLookup, _in_order, check_actions
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


def test_a_wait_with_the_same_sentence_but_a_new_code_is_listed() -> None:
    """(The job's code is what ``hctl`` shows next to the sentence: e.g. a Resources wait that
    the cordons turn into NodeCordoned must reach the job.)"""
    plan = check_actions(snapshot(), [Wait("a", "no room", "NodeCordoned"), Wait("b", "", "")])
    assert plan.waits == [Wait("a", "no room", "NodeCordoned")] and plan.n_waits == 2


def test_a_pass_of_only_good_waits_and_assigns_keeps_the_order_of_each_kind() -> None:
    actions: list[Action] = [Wait("a", "x"), Assign("b", "n0", ("n0g1",), float("nan")), Preempt("r", "go")]
    plan = check_actions(snapshot(), actions)
    assert plan.waits == [Wait("a", "x")] and plan.assigns == [Assign("b", "n0", ("n0g1",), 1.0)]
    assert plan.preempts == [Preempt("r", "go")] and not plan.dropped


_IDS = st.sampled_from(["a", "b", "r", "ghost"])
_GPUS = st.lists(st.sampled_from(["n0g0", "n0g1", "n1g0"]), min_size=1, max_size=2).map(tuple)
_WAITS = st.builds(Wait, _IDS, st.sampled_from(["no room", "x", ""]), st.sampled_from(["", "Resources"]))
_ACTIONS = st.one_of(
    _WAITS,
    st.builds(Assign, _IDS, st.just("n0"), _GPUS, st.sampled_from([1.0, 0.0])),
    st.builds(Preempt, _IDS, st.just("go")),
    st.just("not an action"),
)
# Passes the bulk path takes (one action per job) as often as any other.
_PASSES = st.one_of(
    st.lists(_ACTIONS, max_size=8),
    st.lists(st.one_of(_WAITS, _ACTIONS), max_size=4, unique_by=lambda a: getattr(a, "job_id", "")),
)


@settings(max_examples=300)
@given(_PASSES)
def test_the_bulk_wait_path_gives_the_plan_of_checking_one_by_one(actions: list[Action]) -> None:
    """The oracle checks every action in order; check_actions takes its bulk path for Waits
    whenever it may, and must come to the same plan (dropped actions and their order included)."""
    snap = snapshot()
    assert check_actions(snap, list(actions)) == _in_order(actions, SnapshotLookup(snap), Plan())
