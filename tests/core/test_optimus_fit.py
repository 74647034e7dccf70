"""Optimus's fits: the loss curve from noisy points, the speed model, the bounded history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from horus_core.errors import InvalidArgument
from horus_core.policies.optimus.fit import CONVERGE_DROP, LossCurve, SpeedModel, fit_loss_curve, fit_speed
from horus_core.policies.optimus.history import ProgressBook, ProgressHistory
from horus_core.sim.elastic import synthetic_curve


@pytest.mark.parametrize(("b0", "b1", "b2"), [(2e-4, 0.5, 0.3), (1e-3, 0.25, 1.2), (5e-5, 1.0, 0.0)])
def test_loss_fit_recovers_known_coefficients_from_noisy_points(b0: float, b1: float, b2: float) -> None:
    truth = LossCurve(b0, b1, b2)
    rng = np.random.default_rng(7)
    steps = np.linspace(0, 40_000, 200)
    losses = [truth.loss(k) * (1 + 0.01 * rng.standard_normal()) for k in steps]
    fit = fit_loss_curve(list(steps), losses)
    assert fit is not None
    assert fit.b0 == pytest.approx(b0, rel=0.15)
    assert fit.b1 == pytest.approx(b1, rel=0.15)
    assert fit.b2 == pytest.approx(b2, abs=0.05)
    for k in (100.0, 10_000.0, 60_000.0):  # including beyond the points seen
        assert fit.loss(k) == pytest.approx(truth.loss(k), rel=0.03)


def test_loss_fit_predicts_convergence_of_a_simulated_job_from_its_first_third() -> None:
    total = 300_000.0
    curve = synthetic_curve(total, l0=4.0, floor=0.8)
    assert curve.converge_step() == pytest.approx(total, rel=1e-9)
    rng = np.random.default_rng(3)
    steps = np.linspace(0, total / 3, 120)
    fit = fit_loss_curve(list(steps), [curve.loss(k) * (1 + 0.02 * rng.standard_normal()) for k in steps])
    assert fit is not None
    assert fit.converge_step() == pytest.approx(total, rel=0.25)


def test_convergence_step_is_where_the_drop_per_thousand_steps_hits_the_threshold() -> None:
    curve = LossCurve(1e-3, 0.5, 0.1)
    k = curve.converge_step()
    drop = curve.loss(k) - curve.loss(k + 1000)
    assert drop == pytest.approx(CONVERGE_DROP / curve.b1, rel=0.01)
    assert LossCurve(0.0, 0.5, 0.1).converge_step() == math.inf


def test_loss_fit_needs_enough_points_and_matching_lengths() -> None:
    assert fit_loss_curve([0, 1, 2], [3.0, 2.0, 1.5]) is None
    assert fit_loss_curve([0, 1, 2, 3], [2.0, 2.0, 2.0, 2.0]) is None  # nothing to fit
    assert fit_loss_curve([0, 1, 2, 3, 4], [3.0, math.nan, 2.0, 1.8, math.inf]) is None  # 3 finite
    with pytest.raises(InvalidArgument):
        fit_loss_curve([0, 1], [1.0])


def test_speed_fit_recovers_the_model_from_four_counts() -> None:
    truth = SpeedModel(a=0.8, b=0.05, c=0.004)
    counts = [1, 2, 4, 8]
    fit = fit_speed(counts, [truth.rate(w) for w in counts])
    assert fit is not None
    for w in range(1, 9):
        assert fit.rate(w) == pytest.approx(truth.rate(w), rel=1e-6)
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.8, 0.05, 0.004), rel=1e-4)
    assert fit.rate(0) == 0.0


def test_speed_fit_is_non_negative_on_superlinear_data_and_ideal_from_one_point() -> None:
    fit = fit_speed([1, 2, 4], [1.0, 2.5, 6.0])  # faster than ideal: no negative coefficient
    assert fit is not None and min(fit.a, fit.b, fit.c) >= 0.0
    one = fit_speed([2], [10.0])
    assert one is not None and one.rate(2) == pytest.approx(10.0) and one.rate(4) == pytest.approx(20.0)
    assert fit_speed([1, 2], [0.0, -1.0]) is None


def test_history_is_bounded_and_still_spans_the_run() -> None:
    history = ProgressHistory(cap=16)
    for k in range(1000):
        history.add(float(k), 10.0 / (k + 1))
    assert len(history.steps) < 16 and len(history.steps) == len(history.losses)
    assert history.steps[0] == 0.0 and history.steps[-1] > 900
    assert history.last_step == 999.0
    gaps = np.diff(history.steps)
    assert gaps.max() <= 2 * gaps.min()  # evenly decimated


def test_book_ignores_bad_points_and_forgets_jobs() -> None:
    book = ProgressBook(cap=8)
    book.record("a", 5.0, math.nan)
    book.record("a", -1.0, 1.0)
    book.record("b", 1.0, 2.0)
    a = book.get("a")
    assert a is not None and a.last_step == 5.0 and a.steps == []
    book.forget({"b"})
    assert book.get("a") is None and book.get("b") is not None
    with pytest.raises(ValueError):
        ProgressBook(cap=2)
