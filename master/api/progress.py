"""``GetJobProgress``: a job's kept progress and the estimate of what is left, as protobuf."""

from __future__ import annotations

import math

from horus_core.errors import InvalidArgument
from horus_core.gen import client_pb2 as cpb
from horus_core.model import Job
from horus_core.policies.optimus.journal import ProgressJournal, ProgressPoint
from master.services.progress import ProgressKeeper, estimate_of

MAX_HISTORY = 512


def point_to_pb(p: ProgressPoint) -> cpb.ProgressPoint:
    msg = cpb.ProgressPoint(attempt=p.attempt, step=p.step, samples_per_s=p.samples_per_s, at=p.at)
    if p.loss is not None:
        msg.loss = p.loss
    return msg


async def progress_report(
    keeper: ProgressKeeper | None, job: Job, history: int, speed: float | None = None
) -> cpb.JobProgressReport:
    """``speed``: the job's measured speed (master/observe/view.py), where known."""
    if not 0 <= history <= MAX_HISTORY:
        raise InvalidArgument("history", f"must be within [0, {MAX_HISTORY}], got {history}")
    journal = await keeper.journal(job.id) if keeper is not None else ProgressJournal()
    msg = cpb.JobProgressReport(job_id=job.id, points=len(journal.points))
    if journal.latest is not None:
        msg.latest.CopyFrom(point_to_pb(journal.latest))
    est = estimate_of(job, journal)
    msg.estimate_from = est.source
    for name in ("steps_left", "seconds_left", "target_step"):
        value = getattr(est, name)
        if value is not None and math.isfinite(value):
            setattr(msg, name, value)
    if est.curve is not None:
        msg.curve_b0, msg.curve_b1, msg.curve_b2 = est.curve.b0, est.curve.b1, est.curve.b2
    if history:
        msg.history.extend(point_to_pb(p) for p in journal.points[-history:])
    if speed is not None and math.isfinite(speed):
        msg.measured_speed = speed
    return msg
