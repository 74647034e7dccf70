"""Reports and running totals kept as columns (``horus_core/policies/reported.py``,
``horus_core/sim/columns.py``): a round done in bulk leaves exactly, to the bit, what the same
reports or settles one at a time leave, and a simulation whose policy hears each report alone
runs exactly as one hearing each round's reports at once."""

from __future__ import annotations

import math

import numpy as np

from horus_core.interference import default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.policies import horus
from horus_core.policies.base import Report, Reports
from horus_core.policies.optimus.fit import LossCurve
from horus_core.policies.pack import build
from horus_core.policies.remaining import RemainingWork
from horus_core.sim import SimConfig, Simulator, build_cluster, generate_synthetic, parse_synthetic
from horus_core.sim.columns import JobColumns
from horus_core.testing import pending

R50 = "ResNet-50 (batch size 64)"
CURVE = LossCurve(0.416, 0.25, 0.3)


def odd_step(rng: np.random.Generator, base: float) -> float:
    """Mostly a step ahead of ``base``; now and then one that goes back, stays, or is not a step."""
    roll = rng.random()
    if roll < 0.04:
        return float(rng.choice([math.nan, math.inf, -1.0]))
    if roll < 0.1:
        return base * float(rng.uniform(0.5, 1.0))  # (a restart from a checkpoint, or no progress)
    return base + float(rng.exponential(50.0))


def alone(reports: Reports) -> list[Reports]:
    """Each report of ``reports`` as a batch of its own."""
    losses = reports.losses
    return [
        Reports([i], reports.steps[k : k + 1], None if losses is None else [losses[k]], reports.at[k : k + 1])
        for k, i in enumerate(reports.ids)
    ]


def test_a_round_of_reports_heard_at_once_is_the_same_reports_one_by_one() -> None:
    """Jobs come and go (their rows are freed and given again, and the columns grow past their
    first size); some reports are dropped as invalid; losses come for some rounds. Every track,
    estimate and due fit stays the same as hearing the reports one by one, with or without the
    source's job numbers."""
    rng = np.random.default_rng(5)
    one, cols, numbered = RemainingWork(), RemainingWork(), RemainingWork()
    steps: dict[str, float] = {}
    live, gone = [f"j{i}" for i in range(40)], []
    born = len(live)
    for n in range(120):
        now = 30.0 * n if rng.random() > 0.02 else math.nan
        if rng.random() < 0.3:  # a job leaves, two arrive
            gone.append(live.pop(int(rng.integers(len(live)))))
            live += [f"j{born}", f"j{born + 1}"]
            born += 2
        ids = [i for i in live if rng.random() < 0.9]
        values = np.array([odd_step(rng, steps.get(i, 0.0)) for i in ids])
        steps.update((i, v) for i, v in zip(ids, values.tolist(), strict=True) if math.isfinite(v) and v >= 0)
        with_loss = n % 3 == 0
        losses = (
            [None if rng.random() < 0.2 else CURVE.loss(s) for s in values.tolist()] if with_loss else None
        )
        batch = Reports(ids, values, losses, np.full(len(ids), now))
        for report in alone(batch):
            one.hear(report)
        cols.hear(batch)
        source = "a" if n < 80 else "b"  # (numbers from another source: found by id again)
        numbers = (source, np.array([int(i[1:]) for i in ids], np.int64))
        numbered.hear(Reports(ids, values, losses, batch.at, numbers))
        if n % 10 == 9:  # the jobs that left are dropped
            for work in (one, cols, numbered):
                work.drop(gone)
            assert not set(gone) & cols.tracks.keys() and cols.reports.held == len(cols.tracks)
            gone.clear()
        for work in (cols, numbered):
            assert {k: t.state() for k, t in work.tracks.items()} == {
                k: t.state() for k, t in one.tracks.items()
            }
            assert work.due == one.due
    assert len(cols.reports.adds) > 64  # (the columns grew)
    jobs = [pending(i, R50, total_steps=0 if k % 2 else 90_000) for k, i in enumerate(live)]
    left = [cols.gpu_s_left(j) for j in jobs]
    assert left == [one.gpu_s_left(j) for j in jobs]
    assert any(v is not None for v in left) and one.due  # (estimates and fits were made)


def test_running_totals_settled_in_bulk_are_the_totals_settled_one_by_one() -> None:
    rng = np.random.default_rng(3)
    n = 50
    one, bulk = JobColumns(n), JobColumns(n)
    for cols in (one, bulk):
        cols.rate[:] = np.random.default_rng(1).uniform(0.0, 20.0, n)
        cols.speed[:] = np.random.default_rng(2).uniform(0.2, 1.0, n)
    now = 0.0
    for _ in range(200):
        now += float(rng.exponential(100.0))
        rows = np.flatnonzero(rng.random(n) < 0.7).astype(np.intp)
        late = rows[rng.random(len(rows)) < 0.1]  # (some rows were settled past now: dt < 0)
        for cols in (one, bulk):
            cols.last[late] = now + 5.0
        for i in rows.tolist():
            one.settle(i, True, now, 0.5)
        done = bulk.settle_many(rows, now, 0.5)
        assert done.tolist() == one.done[rows].tolist()
        changed = rows[rng.random(len(rows)) < 0.2]  # (a co-runner came or went)
        for cols in (one, bulk):
            cols.speed[changed] = np.random.default_rng(len(changed)).uniform(0.2, 1.0, len(changed))
            cols.rate[changed] = cols.speed[changed] * 10.0
    for name in ("done", "run_s", "speed_s", "slow_s", "min_speed", "last"):
        assert getattr(bulk, name).tolist() == getattr(one, name).tolist(), name
    assert (one.slow_s > 0).any() and (one.slow_s < one.run_s).any()


class Hears:
    """``horus``, hearing each round's reports at once or (``split``) one report at a time, and
    keeping what it heard."""

    def __init__(self, split: bool) -> None:
        self.inner = build(horus.HORUS, default_model())
        self.name, self.split = self.inner.name, split
        self.heard: list[Report] = []

    @property
    def progress(self) -> Hears:
        return self

    def hear(self, reports: Reports) -> None:
        n, losses = len(reports), reports.losses
        self.heard += zip(
            reports.ids, reports.steps.tolist(), losses or [None] * n, reports.at.tolist(), strict=True
        )
        work = self.inner.progress
        assert work is not None
        for batch in alone(reports) if self.split else [reports]:
            work.hear(batch)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.inner.decide(snapshot, now)


def test_a_simulation_heard_report_by_report_runs_as_one_heard_round_by_round() -> None:
    """The same reports, to the bit, and the same run, with and without loss curves."""
    trace = generate_synthetic(
        parse_synthetic("synthetic:jobs=40,rate=40,seed=2"), default_model().solo_throughput
    )
    runs = []
    for curves in (False, True):
        for policy in (Hears(split=True), Hears(split=False)):
            config = SimConfig(loss_curves=curves, hide_total_steps=curves, timeline=False)
            sim = Simulator(trace, build_cluster("v100:4"), policy, default_model(), config)
            runs.append((policy.heard, sim.run().records))
    assert len(runs[0][0]) > 500 and runs[0] == runs[1]
    assert any(loss is not None for _, _, loss, _ in runs[2][0]) and runs[2] == runs[3]
    assert runs[0][1] != runs[2][1]  # (lengths from loss curves alone order the queue differently)


def test_a_row_given_again_keeps_nothing_of_its_last_job() -> None:
    """A job that left frees its report row; the next job given that row starts from nothing
    (no last report, no rates), exactly as on a row never used."""
    used, new = RemainingWork(), RemainingWork()
    for k in range(6):
        used.hear(Reports(["old"], np.array([100.0 * k]), None, np.array([30.0 * k])))
    row = used.tracks["old"].row
    used.drop(["old"])
    for work in (used, new):
        work.hear(Reports(["next"], np.array([7.0]), None, np.array([500.0])))
    assert used.tracks["next"].row == row
    assert used.tracks["next"].state() == new.tracks["next"].state()
    assert used.tracks["next"].adds == 1 and used.tracks["next"].speed() is None
