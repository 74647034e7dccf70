"""The live jobs (pending and active) in memory: what a scheduling pass and the worker plane read.

The index is fed by the rows each committed job write hands back (submissions, transitions and
the pending-reason sweep, through :class:`master.services.core.JobWriter`), so a pass never reads
SQLite; it is built from the database when the master opens it. A row is taken only if its
``version`` is not older than the one held, so a late reply can never roll a job back, and a
job that left (finished) is remembered for a while so a late reply cannot bring it back.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from uuid import uuid4

import numpy as np
from numpy.typing import NDArray

from horus_core.gang import job_nodes
from horus_core.inorder import InOrder
from horus_core.model import Job, JobChanges, JobState, Node, NodeState
from master.store.rows import JobRow

LIVE_STATES = (JobState.PENDING, JobState.ASSIGNED, JobState.RUNNING)
_GONE_KEPT = 4096  # ids of jobs that left, kept against late replies
# The split's classes as bits (pending, active, running), and the bits of each live state.
I64 = NDArray[np.int64]
_CLASS_BITS = (1, 2, 4)
_CLASSES = {JobState.PENDING: 1, JobState.ASSIGNED: 2, JobState.RUNNING: 2 | 4}


class LiveIndex:
    """Live job rows by id, in submission order; active ones also by node. (A row from a
    submission carries ``seq`` 0: the index orders by arrival, not by that column.)"""

    def __init__(self, rows: Iterable[JobRow] = ()) -> None:
        self._rows: dict[str, JobRow] = {}
        self._job: dict[str, Job] = {}  # the rows' jobs, kept in step (same keys, same order)
        self._on: dict[str, dict[str, JobRow]] = {}  # node -> active rows there
        self._held: dict[str, dict[str, Job]] = {}  # GPU uuid -> active jobs holding it
        self._floored: set[str] = set()  # active jobs with a speed floor of their own
        self._gone: OrderedDict[str, int] = OrderedDict()  # id -> version it left with
        self._jobs: tuple[Job, ...] | None = None
        self._arrival: dict[str, int] = {}  # id -> arrival number (the order of ``_job``)
        self._arrivals = 0
        self._split = {"pending": InOrder(), "active": InOrder(), "running": InOrder()}
        self._classes = tuple(zip(_CLASS_BITS, self._split.values(), strict=True))
        self._name = f"live-{uuid4().hex}"  # (names this index in the changes it hands out)
        self._epoch = 0  # the last snapshot's (see handout)
        self._since: dict[str, None] = {}  # ids changed since that snapshot
        self._overflow = False  # more changed than kept: the next changes say "look at all"
        self.find = self._job.get  # job id -> the live job (None): the quickest look-up
        self.update(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def jobs(self) -> tuple[Job, ...]:
        """The live jobs, in submission order (what a scheduling pass hands the policy)."""
        if self._jobs is None:
            self._jobs = tuple(self._job.values())
        return self._jobs

    def active(self) -> list[Job]:
        """The ASSIGNED and RUNNING jobs, in submission order."""
        return list(self._split["active"].jobs())

    def split(self) -> dict[str, tuple[Job, ...]]:
        """The live jobs by class, each in the order of :meth:`jobs`: what
        :meth:`horus_core.model.ClusterSnapshot.split_as` takes (kept as jobs change)."""
        return {name: group.jobs() for name, group in self._split.items()}

    def handout(self) -> JobChanges:
        """The changes since the last call: call it when a snapshot of :meth:`jobs` is taken
        for a pass (the snapshot carries them: :class:`horus_core.model.JobChanges`)."""
        base, self._epoch = self._epoch, self._epoch + 1
        if self._overflow:  # (no pass for long: a consumer looks at every job)
            base, self._overflow = -1, False
        jobs, self._since = {i: self._job.get(i) for i in self._since}, {}
        pending, active = self._split["pending"], self._split["active"]
        numbers = np.concatenate((pending.numbers(), active.numbers()))
        versions = np.concatenate((pending.versions(), active.versions()))
        return JobChanges(self._name, base, self._epoch, jobs, numbers, versions)

    def rows(self) -> list[JobRow]:
        return list(self._rows.values())

    def get(self, job_id: str) -> JobRow | None:
        return self._rows.get(job_id)

    def active_on(self, node: str) -> list[JobRow]:
        """The ASSIGNED and RUNNING jobs on ``node`` (in no particular order; a gang is on each
        node of its attempt)."""
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
        self._since[job.id] = None
        if len(self._since) > len(self._job) + _GONE_KEPT:  # (no pass for long: not kept)
            self._since, self._overflow = {}, True
        if held is not None and held.job.state.active:
            self._unplace(held.job)
        live = job.state in LIVE_STATES
        self._order(job.id, None if held is None else held.job, job if live else None)
        if live:
            self._rows[job.id] = row
            self._job[job.id] = job
            if job.state.active:
                for node in job_nodes(job):  # (a gang: on every node of its attempt)
                    self._on.setdefault(node, {})[job.id] = row
                for uuid in job.gpus:
                    self._held.setdefault(uuid, {})[job.id] = job
                if job.spec.min_speed > 0.0:
                    self._floored.add(job.id)
            return
        self._rows.pop(job.id, None)
        self._job.pop(job.id, None)
        self._gone[job.id] = job.version
        if len(self._gone) > _GONE_KEPT:
            self._gone.popitem(last=False)

    def _order(self, job_id: str, old: Job | None, new: Job | None) -> None:
        at = self._arrival.get(job_id)
        if at is None:
            if new is None:
                return
            at = self._arrival[job_id] = self._arrivals
            self._arrivals += 1
        was = 0 if old is None else _CLASSES.get(old.state, 0)
        now = 0 if new is None else _CLASSES.get(new.state, 0)
        for bit, group in self._classes:
            if now & bit and new is not None:
                group.put(at, new)
            elif was & bit:
                group.drop(at)
        if new is None:
            del self._arrival[job_id]

    def _unplace(self, job: Job) -> None:
        for node in job_nodes(job):
            self._on[node].pop(job.id, None)
        for uuid in job.gpus:
            self._held[uuid].pop(job.id, None)
        self._floored.discard(job.id)

    def job(self, job_id: str) -> Job | None:
        return self._job.get(job_id)

    def by_id(self) -> Mapping[str, Job]:
        """The live jobs by id (a read-only view, kept current)."""
        return MappingProxyType(self._job)

    def floored(self) -> bool:
        """Some active job has a speed floor of its own (``spec.min_speed``)."""
        return bool(self._floored)

    def sharing(self) -> set[str]:
        """The ids of the active jobs that share a GPU with another active job."""
        return {job_id for held in self._held.values() if len(held) > 1 for job_id in held}

    def residents(self, uuid: str) -> list[Job]:
        """The active jobs that hold GPU ``uuid``."""
        return list(self._held.get(uuid, {}).values())

    def set_pending_reason(self, reason: str, code: str = "") -> None:
        """What :class:`master.store.jobs.SetPendingReasonOp` did to the rows: every pending job
        whose reason or code differs gets both and one more version."""
        changed = [
            dataclasses.replace(
                r, job=dataclasses.replace(r.job, reason=reason, reason_code=code, version=r.job.version + 1)
            )
            for r in self._rows.values()
            if r.job.state is JobState.PENDING and (r.job.reason != reason or r.job.reason_code != code)
        ]
        self.update(changed)


class IndexLookup:
    """The action checks' lookup (:class:`horus_core.policies.checks.Lookup`) over the index
    and a pass's nodes, so a check builds no per-job map: jobs and GPU residents come from the
    index as it stands when the actions are checked (at least as new as the snapshot the policy
    saw; the transitions re-check against the committed rows anyway)."""

    def __init__(self, index: LiveIndex, nodes: Iterable[Node]) -> None:
        self.job = index.find
        self.residents = index.residents
        self._nodes = {n.name: n for n in nodes if n.state is NodeState.READY}
        self._healthy: dict[str, frozenset[str]] = {}  # node -> its healthy GPUs (those asked about)

    def node_ready(self, node: str) -> bool:
        return node in self._nodes

    def healthy_gpu(self, node: str, uuid: str) -> bool:
        healthy = self._healthy.get(node)
        if healthy is None:
            ready = self._nodes.get(node)
            healthy = frozenset(g.uuid for g in ready.gpus if g.healthy) if ready is not None else frozenset()
            self._healthy[node] = healthy
        return uuid in healthy

    def node_of(self, uuid: str) -> str:
        """The ready node holding ``uuid`` ("" for none): a GPU of a gang spread over nodes."""
        return next((n.name for n in self._nodes.values() if any(g.uuid == uuid for g in n.gpus)), "")
