"""The least-attained-service ledger's hysteresis (what keeps ``horus+`` from thrashing): a job
stopped before must run longer before it is stopped again, and a victim may have to be more
than one level above the waiting job; ``horus`` keeps neither (its defaults)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray

from horus_core.errors import InvalidArgument
from horus_core.model import ClusterSnapshot, Job, JobState, Preempt, Wait
from horus_core.policies.attained import MIN_SLICE_S, Attained
from horus_core.testing import nodes, pending, running
from horus_core.testing.ledgers import LasLedger

R50 = "ResNet-50 (batch size 16)"
ONE = nodes(1, 1)
HOUR = 3600.0


def stopped(ledger: LasLedger, victim: Job, waiting: Job, now: float) -> list[str]:
    """Who the ledger stops at ``now`` for ``waiting`` left waiting behind ``victim``."""
    snap = ClusterSnapshot(ONE, (victim, waiting))
    ledger.observe(snap, now)
    return [p.job_id for p in ledger.las.preempts(snap, [Wait(waiting.id, "no room")], now)]


def attempt(job: Job, n: int) -> Job:
    return replace(job, attempt=n, state=JobState.RUNNING)


@pytest.mark.parametrize(("growth", "second_stop_after"), [(1.0, MIN_SLICE_S), (2.0, 2 * MIN_SLICE_S)])
def test_a_job_stopped_before_runs_longer_before_the_next_stop(
    growth: float, second_stop_after: float
) -> None:
    ledger = LasLedger(slice_growth=growth)
    long = running("long", R50, ("n0g0",), exclusive=True)
    new = pending("new", R50, at=10.0, exclusive=True)
    ledger.observe(ClusterSnapshot(ONE, (long,)), 0.0)
    assert stopped(ledger, long, new, 1.5 * HOUR) == ["long"]  # level 1 against level 0
    assert ledger.las.stops == {"long": 1}
    back = attempt(long, 2)  # started again at 2 h (the newcomer ran meanwhile and left)
    ledger.observe(ClusterSnapshot(ONE, (back,)), 2 * HOUR)
    newer = pending("newer", R50, at=20.0, exclusive=True)
    just_before = 2 * HOUR + second_stop_after - 1.0
    assert stopped(ledger, back, newer, just_before) == []
    assert stopped(ledger, back, newer, just_before + 2.0) == ["long"]


def test_a_victim_must_be_min_gap_levels_above() -> None:
    ledger = LasLedger(min_gap=2)
    long = running("long", R50, ("n0g0",), exclusive=True)
    new = pending("new", R50, at=10.0, exclusive=True)
    ledger.observe(ClusterSnapshot(ONE, (long,)), 0.0)
    assert stopped(ledger, long, new, 1.5 * HOUR) == []  # level 1: one above, not two
    assert stopped(ledger, long, new, 2.5 * HOUR) == ["long"]  # level 2
    assert Attained().min_gap == 1 and Attained().slice_growth == 1.0  # horus's defaults


def test_the_stop_counts_are_forgotten_with_the_job() -> None:
    ledger = LasLedger()
    ledger.observe(ClusterSnapshot(ONE, (running("gone", R50, ("n0g0",)),)), 0.0)
    ledger.las.stops["gone"] = 3
    ledger.observe(ClusterSnapshot(ONE, ()), 1.0)
    assert ledger.las.stops == {}


@pytest.mark.parametrize(("growth", "gap"), [(0.5, 1), (1.0, 0)])
def test_bad_hysteresis_is_refused(growth: float, gap: int) -> None:
    with pytest.raises(InvalidArgument, match="las"):
        Attained(slice_growth=growth, min_gap=gap)


def test_preempt_actions_name_the_waiting_job() -> None:
    ledger = LasLedger()
    long = running("long", R50, ("n0g0",), exclusive=True)
    new = pending("new", R50, at=10.0, exclusive=True)
    ledger.observe(ClusterSnapshot(ONE, (long,)), 0.0)
    snap = ClusterSnapshot(ONE, (long, new))
    ledger.observe(snap, 1.5 * HOUR)
    (act,) = ledger.las.preempts(snap, [Wait("new", "no room")], 1.5 * HOUR)
    assert isinstance(act, Preempt) and "job new" in act.reason


@pytest.mark.parametrize("growth", [1.0, 2.0])
def test_bulk_victim_checks_agree_with_the_per_job_rule(growth: float) -> None:
    """Who has had its minimum slice and the highest victim class, computed in bulk, are what
    the per-job rule (``_slice``, ``_class``) gives, with priorities, levels and past stops."""
    las = Attained(slice_growth=growth)
    jobs = [
        replace(
            running(f"j{i}", R50, (f"g{i}",)), spec=replace(running(f"j{i}", R50, ()).spec, priority=i % 3)
        )
        for i in range(12)
    ]
    las.service = {f"j{i}": HOUR * (i % 5) * 1.5 for i in range(12)}
    las.stops = {f"j{i}": i % 2 for i in range(12)}
    begun = {f"j{i}": -MIN_SLICE_S * (i % 4) for i in range(12)}
    for job in jobs:
        las.columns.run(job, begun[job.id])
    now = 1.0
    slow = [j for j in jobs if now - begun.get(j.id, now) >= las._slice(j.id)]
    assert las.columns.jobs(las._stoppable(now)) == slow
    assert 0 < len(slow) < len(jobs)
    for group in (jobs, slow, jobs[5:7]):
        assert las._top(_marks(las, group)) == max(map(las._class, group))


def _marks(las: Attained, group: list[Job]) -> NDArray[np.bool_]:
    """The slots of ``group``'s jobs in the ledger's columns."""
    mask = np.zeros(len(las.columns.views), np.bool_)
    mask[[las.columns.slots[j.id] for j in group]] = True
    return mask


@given(
    served=st.lists(
        st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]), min_size=1, max_size=14
    ),
    left=st.dictionaries(st.integers(0, 13), st.sampled_from([0.2, 1.5, 3.0, 7.0, 50.0]), max_size=14),
    priorities=st.lists(st.integers(0, 2), min_size=14, max_size=14),
)
def test_the_top_victim_class_with_estimates_is_the_per_job_maximum(
    served: list[float], left: dict[int, float], priorities: list[int]
) -> None:
    """``_top`` looks at estimates only until no LAS level left can beat the best found: the
    answer is still the maximum of the per-job classes, estimates lowering levels included."""
    las = Attained()
    jobs = [
        replace(running(f"j{i}", R50, (f"g{i}",)), spec=replace(running(f"j{i}", R50, ()).spec, priority=p))
        for i, p in enumerate(priorities[: len(served)])
    ]
    las.service = {f"j{i}": HOUR * s for i, s in enumerate(served)}
    las.left = {f"j{i}": HOUR * v for i, v in left.items() if i < len(served)}
    for job in jobs:
        las.columns.run(job, 0.0)
    assert las._top(_marks(las, jobs)) == max(map(las._class, jobs))


@pytest.mark.parametrize(
    "gang_nodes", [("n0", "n1"), ()]
)  # (the master names the nodes; the simulator does not)
def test_a_gang_over_nodes_holds_its_gpus_on_every_node_and_is_no_victim(gang_nodes: tuple[str, ...]) -> None:
    """A gang on two nodes holds GPUs on its second node too: a waiting job does not take that
    node for free room (it used to, and so stopped nobody); it stops a one-node job instead, and
    never the gang (stopping it would idle its GPUs on the other node)."""
    ledger = LasLedger()
    las = ledger.las
    cluster = nodes(3, 2)
    gang = replace(running("gang", R50, ("n0g0", "n0g1", "n1g0"), exclusive=True), nodes=gang_nodes)
    small = running("small", R50, ("n1g1",), node="n1", exclusive=True)
    other = running("other", R50, ("n2g0", "n2g1"), node="n2", exclusive=True)
    new = pending("new", R50, at=10.0, exclusive=True)
    before = (gang, small, other)
    ledger.observe(ClusterSnapshot(cluster, before), 0.0)
    snap = ClusterSnapshot(cluster, (*before, new))
    ledger.observe(snap, 1.5 * HOUR)  # the gang 4.5 GPU-hours, "other" 3: both above the new job
    las.service = {**las.service, "small": 0.5 * HOUR}  # level 0, as the new job: not a victim for it
    (act,) = las.preempts(snap, [Wait("new", "no room")], 1.5 * HOUR)
    assert isinstance(act, Preempt) and act.job_id == "other" and "job new" in act.reason
