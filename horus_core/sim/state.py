"""Mutable per-job bookkeeping of a simulation run, and the frozen record it leaves behind."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job, JobSpec, JobState
from horus_core.policies.optimus.fit import LossCurve
from horus_core.sim.columns import JobColumns

FUTURE, PENDING, ACTIVE, DONE = 0, 1, 2, 3


class _Column:
    """A :class:`SimJob` attribute kept in its row of a :class:`JobColumns` column."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, job: SimJob, owner: object = None) -> float:
        column: NDArray[np.float64] = getattr(job.cols, self.name)
        return float(column[job.idx])

    def __set__(self, job: SimJob, value: float) -> None:
        column: NDArray[np.float64] = getattr(job.cols, self.name)
        column[job.idx] = value


@dataclass(slots=True, eq=False)
class SimJob:
    """One job as the simulator sees it. ``solo`` maps GPU type -> steps/s alone (0: cannot run)."""

    idx: int
    id: str
    spec: JobSpec
    signature: str
    arrival: float
    steps: float
    solo: dict[str, float]
    cols: JobColumns  # its running totals: row ``idx`` (the attributes below)
    status: int = FUTURE
    gpus: tuple[int, ...] = ()  # GPU indices of the current (or last) attempt
    resume_from: tuple[int, ...] = ()  # GPUs it was preempted from, until it restarts
    node: str = ""
    attempt: int = 0
    version: int = 0  # bumps on every rate change; completion events carry it
    started_at: float = -1.0  # start of the current attempt
    first_start: float | None = None
    finish: float | None = None
    preemptions: int = 0
    evictions: int = 0
    view: Job | None = field(default=None, repr=False)  # the frozen Job policies see
    # Elastic jobs (sim/elastic.py): solo steps/s by GPU count, and the loss curve they report.
    solo_at: dict[int, dict[str, float]] | None = field(default=None, repr=False)
    curve: LossCurve | None = field(default=None, repr=False)
    # Gangs over nodes (issue 11): the share of its one-node rate the current attempt keeps
    # (sim/scaling.py), and the most nodes any attempt spanned.
    cross: float = 1.0
    nodes: int = 1

    # Views of the job's row of ``cols``:
    done_steps = _Column("done")
    rate = _Column("rate")  # steps/s now
    speed = _Column("speed")  # normalised speed now (rate / solo on its GPU type)
    last = _Column("last")  # time up to which done_steps and the stats below are settled
    run_s = _Column("run_s")  # time holding GPUs
    speed_s = _Column("speed_s")  # integral of the normalised speed over run time
    slow_s = _Column("slow_s")  # run time spent below the slow threshold
    min_speed = _Column("min_speed")

    def settle(self, now: float, slow_threshold: float) -> None:
        """Account for the time since ``last`` at the current rate."""
        self.cols.settle(self.idx, self.status == ACTIVE, now, slow_threshold)

    def pending_view(self, now: float, reason: str = "") -> Job:
        prev = self.view
        return Job(
            id=self.id,
            spec=self.spec,
            state=JobState.PENDING,
            attempt=self.attempt,
            submitted_at=self.arrival,
            updated_at=now,
            started_at=self.first_start,
            node=self.node,
            gpus=prev.gpus if prev is not None else (),
            reason=reason,
            version=self.next_version(),
        )

    def running_view(self, now: float, uuids: tuple[str, ...], predicted: float) -> Job:
        return Job(
            id=self.id,
            spec=self.spec,
            state=JobState.RUNNING,
            attempt=self.attempt,
            submitted_at=self.arrival,
            updated_at=now,
            started_at=self.first_start,
            node=self.node,
            gpus=uuids,
            predicted_slowdown=predicted,
            version=self.next_version(),
        )

    def next_version(self) -> int:
        """The ``Job.version`` of the next view: one more than the last view's (0 for the first)."""
        return 0 if self.view is None else self.view.version + 1


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What a job left behind: times, speeds, and how often it was stopped."""

    id: str
    job_type: str
    gpus: int
    arrival: float
    first_start: float | None
    finish: float | None
    run_s: float
    mean_speed: float  # time-weighted normalised speed while running (1.0 = solo)
    slow_s: float
    min_speed: float
    attempts: int
    preemptions: int
    evictions: int
    nodes: int = 1  # the most nodes one attempt spanned
    owner: str = ""
    queue: str = ""

    @property
    def jct(self) -> float | None:
        return None if self.finish is None else self.finish - self.arrival

    @property
    def queueing(self) -> float | None:
        return None if self.first_start is None else self.first_start - self.arrival


def record_of(job: SimJob) -> JobRecord:
    return JobRecord(
        id=job.id,
        job_type=job.spec.job_type,
        gpus=job.spec.gpus,
        arrival=job.arrival,
        first_start=job.first_start,
        finish=job.finish,
        run_s=job.run_s,
        mean_speed=job.speed_s / job.run_s if job.run_s > 0 else 1.0,
        slow_s=job.slow_s,
        min_speed=job.min_speed if math.isfinite(job.min_speed) else 1.0,
        attempts=job.attempt,
        preemptions=job.preemptions,
        evictions=job.evictions,
        nodes=job.nodes,
        owner=job.spec.owner,
        queue=job.spec.queue,
    )
