"""What is left of a job, from its progress journal: steps to the target and the time they take.

The target is the spec's ``total_steps`` when given, else the convergence step of the loss curve
fitted by :func:`.fit.fit_loss_curve` (Optimus's ``l(k) = 1/(b0*k + b1) + b2``). The time left
uses the steps/s the latest attempt measured (steps between its first and last kept reports,
over the time between them), so it follows the GPU count the job runs on now.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from horus_core.policies.optimus.fit import LossCurve, fit_loss_curve
from horus_core.policies.optimus.journal import ProgressPoint

FROM_TOTAL = "total_steps"
FROM_CURVE = "loss curve"
RATE_POINTS = 16  # the latest attempt's last points used for its steps/s


@dataclass(frozen=True, slots=True)
class Estimate:
    source: str = ""  # FROM_TOTAL, FROM_CURVE or "" (no estimate)
    target_step: float | None = None
    steps_left: float | None = None
    seconds_left: float | None = None
    curve: LossCurve | None = None
    steps_per_s: float | None = None


def estimate(total_steps: int, points: Sequence[ProgressPoint], latest: ProgressPoint | None) -> Estimate:
    """The estimate for a job with ``total_steps`` (0: unknown) and its kept ``points``."""
    losses = [(float(p.step), p.loss) for p in points if p.loss is not None and p.loss > 0]
    curve = fit_loss_curve([s for s, _ in losses], [v for _, v in losses]) if len(losses) >= 4 else None
    if total_steps > 0:
        source, target = FROM_TOTAL, float(total_steps)
    elif curve is not None and math.isfinite(curve.converge_step()):
        source, target = FROM_CURVE, curve.converge_step()
    else:
        return Estimate(curve=curve, steps_per_s=steps_per_s(points, latest))
    done = float(latest.step) if latest is not None else 0.0
    left = max(target - done, 0.0)
    rate = steps_per_s(points, latest)
    seconds = left / rate if rate is not None else None
    return Estimate(source, target, left, seconds, curve, rate)


def steps_per_s(points: Sequence[ProgressPoint], latest: ProgressPoint | None) -> float | None:
    """Steps/s of the latest attempt from its kept points (and the latest report); None with
    fewer than two reports of it or no time between them."""
    if latest is None:
        return None
    mine = [p for p in points if p.attempt == latest.attempt][-RATE_POINTS:]
    if not mine or mine[-1] != latest:
        mine.append(latest)
    first, last = mine[0], mine[-1]
    span = last.at - first.at
    if span <= 0 or last.step <= first.step:
        return None
    return (last.step - first.step) / span
