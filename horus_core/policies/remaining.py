"""Each job's remaining work in GPU-seconds, from its reported progress alone, and whether the
estimate is confident enough for ``horus``'s queue order to use it instead of attained service.

Fed by progress reports (:class:`~horus_core.policies.base.Reports`) alone. An estimate is
*confident* when both factors are backed by evidence:

- **Steps left.** The spec's ``total_steps`` when given; otherwise the convergence step of the
  loss curve ``l(k) = 1/(b0*k + b1) + b2``, once the fit has :data:`FIT_POINTS` points, an RMS
  residual of at most :data:`MAX_RESIDUAL` of the mean loss, and moved by at most
  :data:`MAX_DRIFT` since the previous fit. A job past its estimated end is not confident.
- **Speed.** The median steps/s over the recent report intervals with progress (at least
  :data:`MIN_INTERVALS`).

Remaining work = steps left / steps/s x GPUs. A fit is redone when the loss points grew by a
quarter (at least 4 new), so each job is fitted O(log reports) times.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job
from horus_core.packing.numbers import NumberIndex
from horus_core.policies.base import Reports
from horus_core.policies.optimus.fit import MIN_POINTS, fit_loss_curve
from horus_core.policies.optimus.history import ProgressHistory
from horus_core.policies.reported import Reported

FIT_POINTS = 8  # loss points before a curve's convergence step is trusted
MAX_RESIDUAL = 0.05  # RMS residual of the fit / mean loss
MAX_DRIFT = 0.10  # relative change of the convergence step between consecutive fits
MIN_INTERVALS = 3  # intervals with progress needed for a speed
_FITTABLE = max(FIT_POINTS, MIN_POINTS)  # loss points a fit needs


@dataclass(slots=True, eq=False)
class _Track:
    """One job's reports: its row of :class:`Reported`, the loss history, the last fit's verdict."""

    reports: Reported
    row: int
    history: ProgressHistory = field(default_factory=ProgressHistory)
    fitted_at: int = 0  # history.version of the last fit
    end: float | None = None  # the last fit's convergence step (None: no usable fit)
    settled: bool = False  # the last two fits agreed and fitted well
    left: tuple[int, float | None] = (-1, None)  # (adds, gpu_s_left): kept by RemainingWork

    @property
    def adds(self) -> int:
        """Reports taken: what the answers below are cached on."""
        return int(self.reports.adds[self.row])

    @property
    def last(self) -> tuple[float, float] | None:
        """(step, time) of the latest report."""
        return self.reports.last(self.row)

    def state(self) -> tuple[object, ...]:
        """Everything the reports left (two tracks fed the same reports have the same)."""
        rates = self.reports.rates(self.row)
        h = self.history
        return (self.last, rates, self.adds, h.steps, h.losses, h.version, self.fitted_at, self.end)

    def speed(self) -> float | None:
        """The median of the recent rates."""
        rates = self.reports.rates(self.row)
        return statistics.median(rates) if len(rates) >= MIN_INTERVALS else None

    def fit_due(self) -> bool:
        """Whether :meth:`curve_end` would refit now (enough points, a quarter more since)."""
        h = self.history
        due = h.version - self.fitted_at >= max(4, self.fitted_at // 4)
        return due and len(h.steps) >= _FITTABLE

    def curve_end(self) -> float | None:
        """The convergence step if the fit is confident (module doc), refitting when due."""
        h = self.history
        if self.fit_due():
            self.fitted_at = h.version
            end = _fit_end(h.steps, h.losses)
            prev, self.end = self.end, end
            self.settled = end is not None and prev is not None and abs(end - prev) <= MAX_DRIFT * end
        return self.end if self.settled else None


def _fit_end(steps: list[float], losses: list[float]) -> float | None:
    """The fitted curve's convergence step, or None if the fit is poor or never converges."""
    curve = fit_loss_curve(steps, losses)
    if curve is None:
        return None
    observed = np.asarray(losses)
    predicted = np.array([curve.loss(k) for k in steps])
    residual = float(np.sqrt(np.mean((predicted - observed) ** 2)))
    end = curve.converge_step()
    ok = math.isfinite(end) and end > 0 and residual <= MAX_RESIDUAL * float(observed.mean())
    return end if ok else None


@dataclass
class RemainingWork:
    """Progress tracks by job id; :meth:`gpu_s_left` is the confident estimate or None (a fit's
    verdict depends on when it is made: :meth:`refit` fits the jobs whose fit came due)."""

    tracks: dict[str, _Track] = field(default_factory=dict)
    due: set[str] = field(default_factory=set)  # ids whose fit came due since the last refit
    reports: Reported = field(default_factory=Reported, repr=False)
    fittable: set[str] = field(default_factory=set, repr=False)  # ids with enough loss points
    numbers: NumberIndex = field(default_factory=NumberIndex, repr=False)  # a source's numbers -> rows

    def hear(self, reports: Reports) -> None:
        """Take each report (job id, step, loss or None, when), in order."""
        if not len(reports):
            return
        rows = self._rows(reports)
        kept = self.reports.add_many(rows, reports.steps, reports.at)
        if reports.losses is None and not self.fittable:
            return
        took, step_of, losses = kept.tolist(), reports.steps.tolist(), reports.losses
        for i, job_id in enumerate(reports.ids):
            loss = None if losses is None else losses[i]
            self._took(job_id, self.tracks[job_id], step_of[i], loss, took[i])

    def _rows(self, reports: Reports) -> NDArray[np.intp]:
        """The report rows of the reports' jobs, tracks made for the new ones."""
        ids, found = reports.ids, None
        if reports.numbers is not None:
            source, numbers = reports.numbers
            if len(numbers) != len(ids):
                raise ValueError(f"{len(ids)} reports with {len(numbers)} numbers")
            found = self.numbers.find(source, numbers)
            if found is not None and found[1] == 0:  # (each one's row found by its number)
                return found[0]
        if found is None:
            tracks = self.tracks
            rows = np.fromiter((t.row if (t := tracks.get(i)) else -1 for i in ids), np.intp, len(ids))
        else:
            rows = found[0]
        miss = np.flatnonzero(rows < 0)
        for k in miss.tolist():
            rows[k] = self._track(ids[k]).row
        if reports.numbers is not None and len(miss):
            self.numbers.put(reports.numbers[1][miss], rows[miss])
        return rows

    def _took(self, job_id: str, track: _Track, step: float, loss: float | None, kept: bool) -> None:
        """The rest of a report: its loss point (if kept), and whether the job's fit came due."""
        if kept and loss is not None:
            track.history.add(step, loss)
            if len(track.history.steps) >= _FITTABLE:
                self.fittable.add(job_id)
        if job_id in self.fittable and track.fit_due():
            self.due.add(job_id)

    def _track(self, job_id: str) -> _Track:
        track = self.tracks.get(job_id)
        if track is None:
            track = self.tracks[job_id] = _Track(self.reports, self.reports.take())
        return track

    def refit(self, jobs: Mapping[str, Job]) -> None:
        """Work out the estimate (so the due fit) of each job of ``jobs`` whose fit came due."""
        if self.due:
            asked = [jobs[i] for i in self.due if i in jobs]
            for job in asked:
                self.gpu_s_left(job)
            self.due.difference_update(j.id for j in asked)

    def gpu_s_left(self, job: Job) -> float | None:
        """GPU-seconds left for ``job`` if the estimate is confident (module doc), else None."""
        track = self.tracks.get(job.id)
        if track is None or track.last is None:
            return None
        if track.left[0] != track.adds:  # (a job's spec is fixed: its reports decide the answer)
            track.left = (track.adds, self._left(job, track, track.last[0]))
        return track.left[1]

    @staticmethod
    def _left(job: Job, track: _Track, step: float) -> float | None:
        speed = track.speed()
        if speed is None or speed <= 0:
            return None
        target = float(job.spec.total_steps) if job.spec.total_steps > 0 else track.curve_end()
        if target is None or step >= target:
            return None
        return (target - step) / speed * max(job.spec.gpus, 1)

    def drop(self, gone: list[str]) -> None:
        """Drop the tracks of ``gone`` (jobs that left); their report rows are given again."""
        rows = [t.row for t in map(self.tracks.pop, gone, repeat(None)) if t is not None]
        if rows:
            self.due.difference_update(gone)
            self.fittable.difference_update(gone)
            self.numbers.free(rows)
            self.reports.free(rows)
