"""Elastic jobs in the simulator: which jobs are elastic, their speed on any GPU count, and the
synthetic loss curve each one reports as it trains.

With ``SimConfig.elastic = f`` a seeded draw makes a fraction ``f`` of the jobs elastic over
``1..hi``, ``hi`` the largest GPU count measured for the job type (Gavel: 1/2/4/8) capped to the
node size; a type measured at one count only stays fixed. ``gpus`` keeps the trace's count, which
is what fixed-allocation policies run.

Speed: measured solo throughput at 1/2/4/8 GPUs where Gavel's table has it; counts between
(3, 5, 6, 7) follow Optimus's speed model fitted to the measured counts of that type
(:func:`horus_core.policies.optimus.fit.fit_speed`), kept between the measured rates of the
neighbouring counts (Gavel measured ResNet-50 at 4 GPUs slower than the fit, so 3 GPUs takes
the 4-GPU rate rather than overtaking it).

Loss: ``l(k) = 1/(b0*k + b1) + b2`` with the initial loss ``l(0)`` drawn from [2, 6] and the floor
``b2`` from [0.05, 0.5] of it; ``b0`` is solved so that the curve converges (by the documented
rule of :meth:`~horus_core.policies.optimus.fit.LossCurve.converge_step`) exactly at the job's
``total_steps``, so a policy that fits the curve learns the job's true length. Each report
multiplies the loss by ``1 + noise * N(0, 1)`` (default 2 %). With ``elastic_known_steps=False``
the specs policies see carry ``total_steps = 0`` and only the curve tells the length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from horus_core.policies.optimus.fit import CONVERGE_DROP, LossCurve, fit_speed
from horus_core.sim.rates import RateCache
from horus_core.sim.state import SimJob

MEASURED = (1, 2, 4, 8)


def make_elastic(
    jobs: Sequence[SimJob],
    rates: RateCache,
    gpu_types: Sequence[str],
    max_node: int,
    fraction: float,
    seed: int,
    known_steps: bool = True,
) -> int:
    """Make a seeded ``fraction`` of ``jobs`` elastic (in place); returns how many."""
    rng = np.random.default_rng(seed)
    count = 0
    for job in jobs:
        pick, l0, floor = rng.random(), rng.uniform(2.0, 6.0), rng.uniform(0.05, 0.5)
        if pick >= fraction:
            continue
        table = speed_table(rates, job.spec.job_type, gpu_types, max_node)
        if len(table) < 2 or job.spec.gpus not in table:
            continue
        hi = max(table)
        total = job.spec.total_steps if known_steps else 0
        job.spec = replace(job.spec, gpus_min=1, gpus_max=hi, total_steps=total)
        job.solo_at = table
        job.curve = synthetic_curve(job.steps, l0, floor * l0)
        count += 1
    return count


def give_curves(jobs: Sequence[SimJob], seed: int, curves: bool, hide_steps: bool) -> int:
    """Every job without one gets a synthetic loss curve (``curves``: drawn as for elastic jobs,
    from a stream of its own) and/or a spec with ``total_steps = 0`` (``hide_steps``: policies
    learn lengths from the reported loss only, as on a live master without ``--total-steps``);
    returns how many jobs got a curve."""
    rng = np.random.default_rng(seed + 2)
    count = 0
    for job in jobs:
        l0, floor = rng.uniform(2.0, 6.0), rng.uniform(0.05, 0.5)
        if curves and job.curve is None:
            job.curve = synthetic_curve(job.steps, l0, floor * l0)
            count += 1
        if hide_steps and job.spec.total_steps:
            job.spec = replace(job.spec, total_steps=0)
    return count


def speed_table(
    rates: RateCache, job_type: str, gpu_types: Sequence[str], max_node: int
) -> dict[int, dict[str, float]]:
    """GPU count -> GPU type -> solo steps/s, for every count from 1 up to the largest measured
    (capped to ``max_node``); empty if the type was measured at no count."""
    measured = {
        t: {w: rates.solo(job_type, w, t) or 0.0 for w in MEASURED if w <= max_node} for t in gpu_types
    }
    top = max((w for per in measured.values() for w, r in per.items() if r > 0), default=0)
    models = {t: fit_speed(list(per), list(per.values())) for t, per in measured.items()}
    out: dict[int, dict[str, float]] = {w: {} for w in range(1, top + 1)}
    for t in gpu_types:
        model, known = models[t], {w: r for w, r in measured[t].items() if r > 0}
        for w in out:
            out[w][t] = known.get(w) or _between(known, w, model.rate(w) if model is not None else 0.0)
    return out


def _between(known: dict[int, float], w: int, value: float) -> float:
    """``value`` kept within the measured rates of the nearest counts below and above ``w``."""
    below = [c for c in known if c < w]
    above = [c for c in known if c > w]
    if below:
        value = max(value, known[max(below)])
    if above:
        value = min(value, known[min(above)])
    return value


def synthetic_curve(steps: float, l0: float, floor: float, drop: float = CONVERGE_DROP) -> LossCurve:
    """The curve from ``l0`` down to ``floor`` that converges at ``steps`` (see module doc).

    With ``u = b0/b1`` the convergence step is ``sqrt(1000/(drop*u)) - 1/u``; writing
    ``s = 1/sqrt(u)`` it is ``A*s - s**2`` with ``A = sqrt(1000/drop)``: the smaller root of
    ``s**2 - A*s + steps = 0``. Lengths beyond ``A**2/4`` (25 M steps by default) take the maximum."""
    b1 = 1.0 / (l0 - floor)
    a = math.sqrt(1000.0 / drop)
    steps = min(max(steps, 1.0), a * a / 4.0)
    s = (a - math.sqrt(max(a * a - 4.0 * steps, 0.0))) / 2.0
    return LossCurve(b1 / (s * s), b1, floor)


class LossReporter:
    """Noisy loss readings of the synthetic curves, from one seeded stream."""

    def __init__(self, seed: int, noise: float = 0.02) -> None:
        self.rng = np.random.default_rng(seed + 1)
        self.noise = noise

    def loss(self, job: SimJob) -> float | None:
        if job.curve is None:
            return None
        return job.curve.loss(job.done_steps) * (1.0 + self.noise * float(self.rng.standard_normal()))
