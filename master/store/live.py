"""The live jobs (pending and active) in memory: what a scheduling pass and the worker plane read.

The index is fed by the rows each committed job write hands back (submissions, transitions and
the pending-reason sweep, through :class:`master.services.core.Core`), so a pass never reads
SQLite; it is built from the database when the master opens it. A row is taken only if its
``version`` is not older than the one held, so a late reply can never roll a job back, and a
job that left (finished) is remembered for a while so a late reply cannot bring it back.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Iterable

from horus_core.model import Job, JobState
from master.store.rows import JobRow

LIVE_STATES = (JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING)
_GONE_KEPT = 4096  # ids of jobs that left, kept against late replies


class LiveIndex:
    """Live job rows by id, in submission order; active ones also by node. (A row from a
    submission carries ``seq`` 0: the index orders by arrival, not by that column.)"""

    def __init__(self, rows: Iterable[JobRow] = ()) -> None:
        self._rows: dict[str, JobRow] = {}
        self._on: dict[str, dict[str, JobRow]] = {}  # node -> active rows there
        self._gone: OrderedDict[str, int] = OrderedDict()  # id -> version it left with
        self._jobs: tuple[Job, ...] | None = None
        self.update(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def jobs(self) -> tuple[Job, ...]:
        """The live jobs, in submission order (what a scheduling pass hands the policy)."""
        if self._jobs is None:
            self._jobs = tuple(r.job for r in self._rows.values())
        return self._jobs

    def rows(self) -> list[JobRow]:
        return list(self._rows.values())

    def get(self, job_id: str) -> JobRow | None:
        return self._rows.get(job_id)

    def active_on(self, node: str) -> list[JobRow]:
        """The ASSIGNED and RUNNING jobs on ``node`` (in no particular order)."""
        return list(self._on.get(node, {}).values())

    def update(self, rows: Iterable[JobRow]) -> None:
        """Take committed rows (new or changed jobs, in commit order)."""
        for row in rows:
            self._put(row)

    def _put(self, row: JobRow) -> None:
        job = row.job
        held = self._rows.get(job.id)
        gone = self._gone.get(job.id)
        stale = held is not None and held.job.version > job.version
        if stale or (gone is not None and gone >= job.version):
            return  # older than what is known
        self._jobs = None
        if held is not None and held.job.state.active:
            self._on[held.job.node].pop(job.id, None)
        if job.state in LIVE_STATES:
            self._rows[job.id] = row
            if job.state.active:
                self._on.setdefault(job.node, {})[job.id] = row
            return
        self._rows.pop(job.id, None)
        self._gone[job.id] = job.version
        if len(self._gone) > _GONE_KEPT:
            self._gone.popitem(last=False)

    def set_pending_reason(self, reason: str) -> None:
        """What :class:`master.store.jobs.SetPendingReasonOp` did to the rows: every pending job
        whose reason differs gets ``reason`` and one more version."""
        changed = [
            dataclasses.replace(r, job=dataclasses.replace(r.job, reason=reason, version=r.job.version + 1))
            for r in self._rows.values()
            if r.job.state is JobState.PENDING and r.job.reason != reason
        ]
        self.update(changed)
