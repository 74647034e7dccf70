"""Jobs' progress in the live master: a bounded journal per job (in memory, saved to the store
every few seconds so a restart keeps it), the reports the policy has yet to hear, and the
estimate of what is left that ``GetJobProgress`` answers.

Reports arrive on the worker streams at any time; the policy runs in a thread during a pass, so
the reports for it queue here and the scheduler hands them over between passes
(:meth:`ProgressKeeper.take_observations`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from horus_core.model import Job
from horus_core.policies.optimus.estimate import Estimate, estimate
from horus_core.policies.optimus.journal import JOURNAL_CAP, ProgressJournal, ProgressPoint
from master.clock import Clock
from master.store import Store
from master.store.progress import JournalRows, SaveProgressOp, load_live_progress, load_progress

log = logging.getLogger(__name__)

SAVE_EVERY_S = 5.0
MAX_QUEUED = 100_000  # reports waiting for the policy; beyond it the oldest are dropped
Observation = tuple[str, float, float | None, float]  # job id, step, loss, at


@dataclass
class ProgressKeeper:
    store: Store
    clock: Clock
    cap: int = JOURNAL_CAP
    save_every_s: float = SAVE_EVERY_S
    journals: dict[str, ProgressJournal] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)
    _queued: list[Observation] = field(default_factory=list)
    _gone: set[str] = field(default_factory=set)
    _saved: dict[str, tuple[int, int]] = field(default_factory=dict)  # job -> (thinned, points stored)
    _last_save: float = float("-inf")

    def record(self, job_id: str, point: ProgressPoint) -> None:
        """One report of a job's current attempt (the caller checked who sent it)."""
        journal = self.journals.get(job_id)
        if journal is None:
            journal = self.journals[job_id] = ProgressJournal(self.cap)
        if not point.valid:
            return
        journal.add(point)
        self._dirty.add(job_id)  # (the latest report is saved even when thinned out)
        self._queued.append((job_id, float(point.step), point.loss, point.at))
        if len(self._queued) > MAX_QUEUED:
            del self._queued[: len(self._queued) - MAX_QUEUED]

    def take_observations(self) -> list[Observation]:
        """The reports the policy has not heard yet (each handed over once)."""
        out, self._queued = self._queued, []
        return out

    async def load(self) -> int:
        """The stored journals of the jobs not yet finished (at start); they are queued for the
        policy too, so its fits start where they were. Returns the number of jobs."""
        stored = await load_live_progress(self.store.read)
        for job_id, points in stored.items():
            journal = self.journals[job_id] = ProgressJournal.restore(points, self.cap)
            self._saved[job_id] = (journal.thinned, len(journal.points))  # (as stored)
            self._queued += [(job_id, float(p.step), p.loss, p.at) for p in journal.points]
        return len(stored)

    async def save(self, force: bool = False) -> int:
        """Every ``save_every_s`` (or now with ``force``): store the journals that changed. Never raises."""
        now = self.clock.now()
        if not self._dirty or (not force and now - self._last_save < self.save_every_s):
            return 0
        self._last_save = now
        todo, self._dirty = self._dirty, set()
        jobs = tuple(self._rows(j) for j in sorted(todo) if j in self.journals)
        try:
            saved: int = await self.store.write(SaveProgressOp(jobs))
        except Exception as exc:
            log.error("progress: could not save %d journals: %s", len(jobs), exc)
            self._dirty |= todo
            for job in jobs:
                self._saved.pop(job.job_id, None)  # (rewrite it next time)
            return 0
        for job_id in self._gone - self._dirty:
            self.journals.pop(job_id, None)
            self._saved.pop(job_id, None)
        self._gone &= self._dirty
        return saved

    def _rows(self, job_id: str) -> JournalRows:
        """What to write of a journal: the points after those already stored (and the latest
        report after them), or all of it once it thinned itself since the last save."""
        journal = self.journals[job_id]
        done = self._saved.get(job_id)
        rewrite = done is None or done[0] != journal.thinned
        start = 0 if rewrite or done is None else done[1]
        self._saved[job_id] = (journal.thinned, len(journal.points))
        return JournalRows(job_id, rewrite, start, stored_points(journal)[start:])

    def prune(self, is_live: Callable[[str], bool]) -> None:
        """Journals of finished jobs (``is_live`` false) leave memory once saved; they stay in
        the store, where ``GetJobProgress`` still finds them."""
        for job_id in [j for j in self.journals if not is_live(j)]:
            if job_id in self._dirty:
                self._gone.add(job_id)
            else:
                self.journals.pop(job_id, None)
                self._saved.pop(job_id, None)

    async def journal(self, job_id: str) -> ProgressJournal:
        """The job's journal: from memory, else (a finished job) from the store."""
        journal = self.journals.get(job_id)
        if journal is None:
            journal = ProgressJournal.restore(await load_progress(self.store.read, job_id), self.cap)
        return journal


def stored_points(journal: ProgressJournal) -> tuple[ProgressPoint, ...]:
    """What the store keeps of a journal: its points, and the latest report after them."""
    latest = journal.latest
    if latest is None or (journal.points and journal.points[-1] == latest):
        return tuple(journal.points)
    return (*journal.points, latest)


def estimate_of(job: Job, journal: ProgressJournal) -> Estimate:
    """What is left of ``job``: nothing to estimate once it ended (a finished job has no steps
    or time left, whatever its target was)."""
    if job.state.terminal:
        return Estimate()
    return estimate(job.spec.total_steps, journal.points, journal.latest)
