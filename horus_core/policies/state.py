"""One scheduling pass's state, built once per snapshot from the change feed, and the book a
policy keeps across passes to build it.

:class:`Book` holds one :class:`Stint` per live job (the job as last seen, when its current
attempt began and started running, when this policy assigned it) plus the job table and GPU
layout caches. :meth:`Book.follow` brings it up to a snapshot from the change feed; where the
feed does not reach back, every job not as last seen counts as changed, every id missing as gone.

:class:`PassState` is one pass (snapshot, time, changes, ended attempts, views built on demand);
every stage of a pass reads it, so every ledger has one path: follow the changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel
from horus_core.model import ClusterSnapshot, Job, JobState
from horus_core.packing.cluster import ClusterLayout, NodeCache
from horus_core.packing.jobs import JobTable, Live


@dataclass(slots=True)
class Stint:
    """A live job's current attempt as the passes saw it."""

    job: Job  # as last seen
    since: float  # when this attempt was first seen waiting (pending) or holding GPUs (active)
    running: float | None = None  # when it was first seen RUNNING (None: it is not)
    placed: tuple[int, float] | None = None  # (attempt, when) a pass of this policy assigned it


@dataclass(frozen=True, slots=True)
class Delta:
    """What :meth:`Book.follow` found: changed jobs (None: gone), ended stints, ids first seen
    running now, and whether every job was looked at."""

    changed: Mapping[str, Job | None]
    ended: list[Stint]
    started: set[str]
    walked: bool


class Book:
    """The records a policy keeps across passes (see the module doc)."""

    def __init__(self) -> None:
        self.stints: dict[str, Stint] = {}
        self.gangs: dict[str, Job] = {}  # the pending gangs (more than one GPU): the gang queue
        self.last: float | None = None  # the time of the last pass followed
        self.table = JobTable()  # per-job packing facts by slot (horus_core.packing.jobs)
        self.nodes = NodeCache()  # the ready GPUs as the kernel numbers them
        self._seen: tuple[str, int] = ("", -1)  # the feed's source and epoch last followed
        self._restored: dict[str, tuple[int, float]] = {}  # id -> (attempt, start): see restore

    def restore(self, running: Mapping[str, tuple[int, float]]) -> None:
        """Running attempts a restarted master rebuilt (id -> (attempt, start)): the first pass
        that sees such a job running in that attempt takes its running stint from there."""
        self._restored = dict(running)
        self._seen = ("", -1)

    def follow(self, snapshot: ClusterSnapshot, now: float) -> Delta:
        """Bring the records up to ``snapshot`` at ``now``."""
        changes = snapshot.changes
        changed = changes.since(*self._seen) if changes is not None else None
        walked = changed is None
        if changed is None:  # (the jobs not as last seen, and those gone)
            get, jobs = self.stints.get, snapshot.jobs
            if not self.stints:  # (a first pass: every job new, none gone)
                changed = {j.id: j for j in jobs}
            else:
                changed = {j.id: j for j in jobs if _changed(get(j.id), j)}
                if len(self.stints) > len(jobs) - sum(i not in self.stints for i in changed):
                    changed.update(dict.fromkeys(self.stints.keys() - snapshot.by_id().keys()))
        self._seen = (changes.source, changes.epoch) if changes is not None else ("", -1)
        ended: list[Stint] = []
        started: set[str] = set()
        if not self.stints and not self._restored:  # (a first pass: in bulk)
            on = JobState.RUNNING
            self.stints = {
                i: Stint(j, now, now if j.state is on else None) for i, j in changed.items() if j is not None
            }
            started = {i for i, j in changed.items() if j is not None and j.state is on}
            self.gangs = {i: j for i, j in changed.items() if j is not None and _gang(j)}
            return Delta(changed, ended, started, walked)
        for i, job in changed.items():
            self._put(i, job, now, ended, started)
        return Delta(changed, ended, started, walked)

    def _put(self, i: str, job: Job | None, now: float, ended: list[Stint], started: set[str]) -> None:
        old = self.stints.get(i)
        if job is not None and _gang(job):
            self.gangs[i] = job
        else:
            self.gangs.pop(i, None)
        if job is None:
            if old is not None:
                del self.stints[i]
                if old.job.state.active:
                    ended.append(old)
            return
        active, running = job.state.active, job.state is JobState.RUNNING
        if old is not None and old.job.attempt == job.attempt and old.job.state.active == active:
            old.job = job
            if running and old.running is None:
                old.running = now
                started.add(i)
            elif not running:
                old.running = None
            return
        if old is not None and old.job.state.active:
            ended.append(old)
        placed = old.placed if old is not None and old.placed and old.placed[0] == job.attempt else None
        seed = self._restored.pop(i, None)
        if running and seed is not None and seed[0] == job.attempt:
            self.stints[i] = Stint(job, now, seed[1], placed if active else None)
            return
        self.stints[i] = Stint(job, now, now if running else None, placed if active else None)
        if running:
            started.add(i)

    def placed(self, job: Job, now: float) -> None:
        """A pass of this policy assigned ``job`` (pending) its next attempt at ``now``."""
        stint = self.stints.get(job.id)
        if stint is not None:
            stint.placed = (job.attempt + 1, now)

    def started_at(self, job: Job, now: float) -> float:
        """When ``job``'s current attempt started holding GPUs: when this policy assigned it,
        else when a pass first saw it active (``now``: not seen)."""
        stint = self.stints.get(job.id)
        if stint is None or stint.job.attempt != job.attempt or not stint.job.state.active:
            return now
        return stint.placed[1] if stint.placed is not None else stint.since


def _gang(job: Job) -> bool:
    """Whether ``job`` is in the gang queue (pending, more than one GPU)."""
    return job.state is JobState.PENDING and job.spec.gpus > 1


def _changed(old: Stint | None, job: Job) -> bool:
    """Whether ``job`` is not as its record last saw it (another version, state, attempt or
    GPUs; an equal job read again is the same)."""
    if old is None:
        return True
    o = old.job
    if o is job:
        return False
    return (
        o.version != job.version or o.state is not job.state or o.attempt != job.attempt or o.gpus != job.gpus
    )


@dataclass(eq=False)
class PassState:
    """One pass: the snapshot, the time, the book brought up to them (see the module doc)."""

    snapshot: ClusterSnapshot
    now: float
    book: Book
    delta: Delta
    last: float | None  # the time of the pass before (None: this is the first)
    _live: Live | None = field(default=None, repr=False)
    _layout: ClusterLayout | None = field(default=None, repr=False)

    @staticmethod
    def begin(snapshot: ClusterSnapshot, now: float, book: Book) -> PassState:
        """Follow ``snapshot`` in ``book`` and make the pass's state."""
        last, delta = book.last, book.follow(snapshot, now)
        book.last = now
        return PassState(snapshot, now, book, delta, last)

    @property
    def layout(self) -> ClusterLayout:
        """The ready GPUs as the kernel numbers them (every stage's views mask this one)."""
        if self._layout is None:
            self._layout = self.book.nodes.layout(self.snapshot.nodes)
        return self._layout

    @property
    def types(self) -> Mapping[str, str]:
        """GPU uuid -> type, on every node (kept with the layout while the nodes are the same)."""
        return self.book.nodes.types(self.snapshot.nodes)

    def live(self, model: InterferenceModel) -> Live:
        """The pass's pending and active jobs in the job table (scanned once per pass). A
        snapshot that lists one job id twice with two specs is refused."""
        if self._live is None:
            s = self.snapshot
            live = self.book.table.scan(s.jobs, model, (s.pending(), s.active()), s.changes)
            if live.duplicates:
                self.book.table = JobTable()  # forget what the refused snapshot left behind
                raise ValueError("the snapshot lists one job id twice with two different specs")
            self._live = live
        return self._live
