"""``horus``'s queue order switches from least attained service to shortest remaining work for
a job whose progress reports give a confident estimate (horus_core/policies/remaining.py), and
only then: an unconfident estimate leaves the LAS order as it was."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from horus_core.model import Assign, ClusterSnapshot, JobState
from horus_core.policies import horus, horus_plus
from horus_core.policies.attained import Attained
from horus_core.policies.base import Reports
from horus_core.policies.optimus.fit import LossCurve
from horus_core.policies.pack import PackingPolicy, build, factory
from horus_core.policies.remaining import RemainingWork
from horus_core.testing import nodes, pending, running
from horus_core.testing.ledgers import LasLedger

R50 = "ResNet-50 (batch size 16)"
ONE = nodes(1, 1)
RAN_S = 5400.0  # "short" ran 1.5 GPU-hours (LAS level 1) before it was stopped


def report(work: RemainingWork, job_id: str, step: float, loss: float | None, now: float) -> None:
    work.hear(Reports.of([(job_id, step, loss, now)]))


def first_served(policy: PackingPolicy, total: int, reports: int,
                 loss: LossCurve | None = None, noise: float = 0.0) -> str:  # fmt: skip
    """Which of "short" (ran 1.5 h at 1 step/s, sent ``reports`` reports) and "fresh" (never
    ran, submitted first) the policy starts on the one free GPU."""
    spec = pending("short", R50, exclusive=True, total_steps=total).spec
    short = replace(running("short", R50, ("n0g0",), exclusive=True), spec=spec)
    rng = np.random.default_rng(0)
    work = policy.progress
    for t in np.linspace(0.0, RAN_S, reports).tolist():  # a pass after each report, as the master
        value = None if loss is None else loss.loss(t) * (1.0 + noise * float(rng.standard_normal()))
        if work is not None:
            report(work, "short", t, value, t)
        policy.decide(ClusterSnapshot(ONE, (short,)), t)
    stopped = replace(short, state=JobState.PENDING, node="", gpus=(), submitted_at=0.0)
    fresh = pending("fresh", R50, at=-100.0, exclusive=True)
    actions = policy.decide(ClusterSnapshot(ONE, (fresh, stopped)), RAN_S)
    (assign,) = [a for a in actions if isinstance(a, Assign)]
    return assign.job_id


POLICIES = [factory(horus.HORUS), factory(horus_plus.HORUS_PLUS)]


@pytest.mark.parametrize("make", POLICIES)
def test_a_confidently_short_job_is_served_before_one_with_less_attained_service(make: object) -> None:
    # total_steps given: 2,600 steps left at 1 step/s = 0.72 GPU-h (level 0, known), "fresh" unknown.
    assert first_served(make(None), total=8000, reports=10) == "short"  # type: ignore[operator]


@pytest.mark.parametrize("make", POLICIES)
def test_the_loss_curve_alone_gives_a_confident_estimate(make: object) -> None:
    curve = LossCurve(b0=0.416, b1=0.25, b2=0.3)  # converges (drop 1e-5) near step 7,750
    assert 5400 < curve.converge_step() < 9000
    assert first_served(make(None), total=0, reports=40, loss=curve, noise=0.001) == "short"  # type: ignore[operator]


@pytest.mark.parametrize(
    ("total", "reports", "loss", "noise", "why"),
    [
        (8000, 3, None, 0.0, "two speed intervals: no speed yet"),
        (0, 10, None, 0.0, "no total_steps and no loss: no target"),
        (0, 40, LossCurve(0.416, 0.25, 0.3), 0.5, "a curve that does not explain the points"),
        (0, 6, LossCurve(0.416, 0.25, 0.3), 0.0, "too few points to fit"),
        (5000, 10, None, 0.0, "past its stated end: the estimate is outlived"),
    ],
)
def test_an_unconfident_estimate_keeps_the_las_order(
    total: int, reports: int, loss: LossCurve | None, noise: float, why: str
) -> None:
    assert first_served(build(horus.HORUS), total, reports, loss, noise) == "fresh", why


def test_las_alone_ignores_progress() -> None:
    policy = build(horus.HORUS_LAS)
    assert policy.las is not None and policy.las.work is None
    assert policy.progress is None  # the simulator reports nothing to it
    assert first_served(policy, total=8000, reports=10) == "fresh"


def test_remaining_gpu_seconds_follow_the_reports_and_are_forgotten_with_the_job() -> None:
    work = RemainingWork()
    job = pending("a", R50, gpus=4, total_steps=100_000)
    for t in range(5):
        report(work, "a", 10.0 * t, None, 10.0 * t)
    left = work.gpu_s_left(job)
    assert left == pytest.approx((100_000 - 40) / 1.0 * 4)  # GPU-seconds: steps / (steps/s) x GPUs
    report(work, "a", 20.0, None, 60.0)  # a restart from a checkpoint: step went back
    assert work.gpu_s_left(job) == pytest.approx((100_000 - 20) * 4)
    work.drop(["a"])
    assert work.gpu_s_left(job) is None


def test_an_estimate_moves_a_job_ahead_never_behind_its_las_level() -> None:
    las = Attained(work=RemainingWork())
    las.service = {"ran": 1.5 * 3600, "new": 0.0}  # LAS levels 1 and 0
    las.left = {"ran": 0.5 * 3600, "new": 20 * 3600}  # confident: little left, much left
    assert (las.level("ran"), las.level("new")) == (0, 0)
    assert list(las.left_of(["ran", "new", "other"])) == [1800.0, 72000.0, np.inf]


def test_levels_in_bulk_are_the_levels_one_by_one() -> None:
    """``levels_of`` (what the queue order reads, vectorised) agrees with ``level`` per job, with
    and without confident estimates, on ledger values at, below and above every boundary."""
    ledger = Attained()
    rng = np.random.default_rng(3)
    edges = [b * f for b in ledger.bounds for f in (0.5, 1.0, 1.5)] + [0.0, 1e9]
    ids = [f"j{i}" for i in range(60)]
    ledger.service = {i: float(rng.choice(edges)) for i in ids[:40]}
    assert ledger.levels_of(ids).tolist() == [ledger.level(i) for i in ids]
    ledger.left = {i: float(rng.choice(edges)) for i in ids[20:50]}
    levels = ledger.levels_of(ids).tolist()
    assert levels == [ledger.level(i) for i in ids]
    assert len(set(levels)) > 2  # (the values cover several levels)


def test_estimates_worked_out_on_ask_equal_every_job_asked_every_pass() -> None:
    """A pass asks ``Attained.left`` about a few ids (the queue, the victims); the estimates, fit
    verdicts included (two consecutive fits must agree), are what asking every tracked job every
    pass gives: the fits that came due are made in the pass, asked or not."""
    curves = [LossCurve(0.416, 0.25, 0.3), LossCurve(0.2, 0.5, 0.1), LossCurve(1.0, 0.1, 0.5)]
    jobs = [pending(f"j{i}", R50, gpus=1 + i % 3, total_steps=0 if i % 2 else 50_000) for i in range(12)]
    ledger, eager = LasLedger(work=RemainingWork()), RemainingWork()
    lazy = ledger.las
    rng = np.random.default_rng(5)
    asked_some = False
    for n in range(80):
        now = 60.0 * n
        for i, job in enumerate(jobs):
            if rng.random() < 0.8:  # (some jobs skip a report; loss None now and then)
                step = now * (1.0 + i / 10) * float(rng.uniform(0.9, 1.1))
                loss = None if rng.random() < 0.1 else curves[i % 3].loss(step)
                report(lazy.work, job.id, step, loss, now)  # type: ignore[arg-type]
                report(eager, job.id, step, loss, now)
        ledger.observe(ClusterSnapshot(ONE, tuple(jobs)), now)
        expected = {j.id: eager.gpu_s_left(j) for j in jobs}  # (the old pass: every job, every time)
        some = [j.id for j in jobs if rng.random() < 0.2]
        assert {i: lazy.left.get(i) for i in some} == {i: expected[i] for i in some}
        asked_some |= any(expected[i] is not None for i in some)
    final = {j.id: v for j in jobs if (v := eager.gpu_s_left(j)) is not None}
    assert dict(lazy.left) == final
    assert asked_some and any(jobs[i].id in final for i in range(1, 12, 2))  # (fits were confident)
