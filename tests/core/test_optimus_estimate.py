"""What is left of a job from its progress journal: bounded journals, the steps/s of the latest
attempt, and the estimate from total_steps or the fitted loss curve."""

from __future__ import annotations

import math

import pytest

from horus_core.policies.optimus.estimate import FROM_CURVE, FROM_TOTAL, estimate, steps_per_s
from horus_core.policies.optimus.journal import ProgressJournal, ProgressPoint
from horus_core.sim.elastic import synthetic_curve

CURVE = synthetic_curve(50_000, 4.0, 0.5)


def point(step: int, attempt: int = 1, at: float | None = None, loss: float | None = None) -> ProgressPoint:
    return ProgressPoint(
        attempt, step, CURVE.loss(step) if loss is None else loss, 64.0, step / 10 if at is None else at
    )


def test_a_journal_stays_bounded_and_spans_the_run() -> None:
    journal = ProgressJournal(cap=8)
    kept = [journal.add(point(k)) for k in range(100)]
    assert len(journal.points) < 8 and journal.latest == point(99)
    assert journal.points[0].step == 0 and journal.points[-1].step > 50 and 8 <= sum(kept) < 100
    assert not journal.add(ProgressPoint(1, 5, math.nan, 10.0, 0.0)) and journal.latest == point(99)
    with pytest.raises(ValueError, match="at least 4"):
        ProgressJournal(cap=2)


def test_restore_keeps_the_newest_points_under_the_cap() -> None:
    journal = ProgressJournal.restore([point(k) for k in range(20)], cap=8)
    assert [p.step for p in journal.points] == list(range(13, 20)) and journal.latest == point(19)
    assert ProgressJournal.restore([]).latest is None


def test_rate_is_the_latest_attempts_own() -> None:
    old = [point(k, attempt=1, at=float(k)) for k in range(0, 100, 10)]  # 1 step/s on attempt 1
    new = [point(k, attempt=2, at=200.0 + (k - 100) / 4) for k in range(100, 200, 10)]  # 4 steps/s
    assert steps_per_s(old + new, new[-1]) == pytest.approx(4.0)
    assert steps_per_s(old, None) is None and steps_per_s(new[:1], new[0]) is None


def test_total_steps_wins_over_the_curve() -> None:
    pts = [point(k) for k in range(0, 10_000, 500)]
    est = estimate(30_000, pts, pts[-1])
    assert est.source == FROM_TOTAL and est.steps_left == 30_000 - 9_500
    assert est.seconds_left == pytest.approx(est.steps_left / 10.0)
    assert estimate(5_000, pts, pts[-1]).steps_left == 0.0  # past its target: nothing left


def test_the_curve_estimates_convergence_without_total_steps() -> None:
    pts = [point(k) for k in range(0, 20_000, 500)]
    est = estimate(0, pts, pts[-1])
    assert est.source == FROM_CURVE and est.curve is not None
    assert est.target_step == pytest.approx(50_000, rel=0.1)  # where the true curve converges
    assert est.steps_left == pytest.approx(est.target_step - 19_500)


def test_no_estimate_without_a_falling_loss() -> None:
    flat = [point(k, loss=1.0) for k in range(10)]
    assert estimate(0, flat, flat[-1]).source == "" and estimate(0, flat, flat[-1]).steps_left is None
    no_loss = [ProgressPoint(1, k, None, 1.0, float(k)) for k in range(10)]
    est = estimate(0, no_loss, no_loss[-1])
    assert est.steps_left is None and est.steps_per_s == pytest.approx(1.0)
