"""The master's shared parts and the composition root that holds them.

Every job write goes through :class:`JobWriter` (submit, apply, set_pending_reason), which feeds
what committed to the live index; :class:`Dispatcher` queues assignments and kills on the nodes'
streams (as model types: the worker-plane API converts them); :class:`Wakeup` asks for a
scheduling pass. :class:`Core` only holds the parts for ``master/app.py`` (and tests): each
service is handed the parts it uses, never the whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from horus_core import gang
from horus_core.model import Job
from horus_core.plane import Assignment, Kill
from horus_core.reasoncodes import QueuePositions
from master.clock import Clock
from master.config import MasterConfig
from master.learning.learner import Learner
from master.services.events import EventBus
from master.services.gangs import GangBook
from master.services.logs import LogStore
from master.services.nodes import NodeRegistry
from master.services.progress import ProgressKeeper
from master.store import Store
from master.store.jobs import Change, SetPendingReasonOp, SubmitOp, SubmitResult, Transition, TransitionOp
from master.store.live import LiveIndex
from master.store.rows import JobRow

log = logging.getLogger(__name__)


class JobWriter:
    """The one way jobs change: each write commits, then the live index and the watchers follow."""

    def __init__(
        self, store: Store, events: EventBus, after_apply: Callable[[list[Change]], None] | None = None
    ) -> None:
        self.store = store
        self.events = events
        # Called with what each apply committed (the dispatcher stops the rest of ended gangs).
        self.after_apply = after_apply
        self.live = LiveIndex()  # rebuilt from the store at start (load_live)

    async def load_live(self) -> None:
        """Build the live index from the database (at start, before any write)."""
        self.live = LiveIndex(await self.store.read.live_jobs())

    async def submit(self, job: Job, request_id: str | None) -> SubmitResult:
        """Insert a new job (or find the one ``request_id`` already made) and index it."""
        write = asyncio.ensure_future(self.store.write(SubmitOp(job, request_id)))
        write.add_done_callback(self._submitted)
        return await asyncio.shield(write)

    def _submitted(self, write: asyncio.Future[SubmitResult]) -> None:
        if not write.cancelled() and write.exception() is None and write.result().created:
            self.live.update((write.result().row,))

    async def apply(self, transitions: Iterable[tuple[str, Transition]]) -> list[Change]:
        """Commit the transitions in one transaction, index them, then tell the watchers."""
        todo = tuple(transitions)
        if not todo:
            return []
        # A caller that goes away does not stop the write (see Writer.submit): the live index
        # follows it when it ends, whoever still waits for it.
        write = asyncio.ensure_future(self.store.write(TransitionOp(todo, self._held(todo))))
        write.add_done_callback(self._applied)
        changes = await asyncio.shield(write)
        self.events.publish_changes(changes)
        if self.after_apply is not None:
            self.after_apply(changes)  # e.g. the other parts of a gang that ended
        return changes

    def _held(self, todo: tuple[tuple[str, Transition], ...]) -> dict[str, JobRow]:
        """The index's rows of the live jobs among ``todo`` (the write need not decode them again
        where they are still the stored ones: :func:`master.store.jobs.held_rows`)."""
        find = self.live.get
        return {job_id: row for job_id, _ in todo if (row := find(job_id)) is not None}

    def _applied(self, write: asyncio.Future[list[Change]]) -> None:
        if not write.cancelled() and write.exception() is None:
            self.live.update(c.after for c in write.result())

    async def set_pending_reason(self, reason: str, code: str = "") -> None:
        """Set every pending job's reason; the index follows in commit order (a callback, as for
        :meth:`apply`: after the write's return, a later write's rows may be indexed already, and
        the index must never hold a version the database gave other content)."""
        write = asyncio.ensure_future(self.store.write(SetPendingReasonOp(reason, code)))
        write.add_done_callback(lambda w: self._reasons_set(w, reason, code))
        await asyncio.shield(write)

    def _reasons_set(self, write: asyncio.Future[int], reason: str, code: str) -> None:
        if not write.cancelled() and write.exception() is None:
            self.live.set_pending_reason(reason, code)


class Dispatcher:
    """Assignments and kills onto the nodes' streams (a multi-node gang: one Assignment per part)."""

    def __init__(self, registry: NodeRegistry, gangs: GangBook) -> None:
        self.registry = registry
        self.gangs = gangs

    def assign(self, job: Job) -> bool:
        if gang.is_gang(job):
            return self._assign_gang(job)
        msg = Assignment(
            job.id, job.attempt, job.spec, tuple(job.gpus), gpu_memory_cap_mib=job.gpu_memory_cap_mib
        )
        sent = self.registry.send(job.node, msg)
        if not sent:
            log.info("assignment %s/%d waits for node %s to reconnect", job.id, job.attempt, job.node)
        return sent

    def _assign_gang(self, job: Job) -> bool:
        """One Assignment per node part; each part that cannot be sent is never re-sent (the
        ack timeout takes the attempt back, as for a job on one node)."""
        sent = True
        for node, msg in self.gangs.assignments(job, self.registry):
            if not self.registry.send(node, msg):
                sent = False
                log.info("gang part %s/%d waits for node %s to reconnect", job.id, job.attempt, node)
        return sent

    def kill(self, node: str, job_id: str, attempt: int, reason: str) -> bool:
        return self.registry.send(node, Kill(job_id, attempt, reason))

    def stop_ended_gangs(self, changes: list[Change]) -> None:
        """Stop the other parts of every gang attempt that ``changes`` ended."""
        for node, job_id, attempt, reason in self.gangs.ended(changes, self.registry):
            self.kill(node, job_id, attempt, reason)


class Wakeup:
    """Asks for a scheduling pass soon (coalesced)."""

    def __init__(self, registry: NodeRegistry) -> None:
        self.registry = registry
        self.needed = asyncio.Event()

    def poke(self) -> None:
        """Without a schedulable node a pass could not place anything: the tick alone keeps the
        pending reasons current then."""
        if self.registry.any_schedulable():
            self.needed.set()


@dataclass
class Core:
    """The parts, built once (master/app.py); services get the ones they use."""

    config: MasterConfig
    store: Store
    clock: Clock
    registry: NodeRegistry
    events: EventBus
    logs: LogStore
    learner: Learner
    writer: JobWriter = field(init=False)
    dispatch: Dispatcher = field(init=False)
    wakeup: Wakeup = field(init=False)
    # Held while the cluster's placement changes hands: reconciliation, node loss, and a
    # scheduling pass's apply + dispatch. Never held across a policy decision.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Jobs' progress journals (issue 12): None in harnesses that build a Core without one.
    progress: ProgressKeeper | None = None
    # Each pending job's (queue, position from 1) as the last scheduling pass served them.
    positions: QueuePositions = field(default_factory=QueuePositions)
    gangs: GangBook = field(default_factory=GangBook)  # multi-node attempts (issue 11)

    def __post_init__(self) -> None:
        self.dispatch = Dispatcher(self.registry, self.gangs)
        self.writer = JobWriter(self.store, self.events, self.dispatch.stop_ended_gangs)
        self.wakeup = Wakeup(self.registry)

    def set_positions(self, positions: QueuePositions) -> None:
        """A scheduling pass's queue positions (read by ``hctl queue`` and the dashboard)."""
        self.positions = positions

    def positions_of(self, job_id: str) -> tuple[str, int] | None:
        """A pending job's (queue, position from 1) at the last scheduling pass."""
        return self.positions.get(job_id)

    @property
    def live(self) -> LiveIndex:
        return self.writer.live
