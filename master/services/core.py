"""What the services share: the store and its live-job index, the node registry, events, logs,
the clock and the lock. Every job write goes through :meth:`Core.submit`, :meth:`Core.apply` or
:meth:`Core.set_pending_reason`, which feed what committed to the live index."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from horus_core import gang, wire
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import Job
from master.clock import Clock
from master.config import MasterConfig
from master.learning.learner import Learner
from master.services.events import EventBus
from master.services.gangs import GangBook
from master.services.logs import LogStore
from master.services.nodes import NodeRegistry
from master.store import Store
from master.store.jobs import Change, SetPendingReasonOp, SubmitOp, SubmitResult, Transition, TransitionOp
from master.store.live import LiveIndex

log = logging.getLogger(__name__)


@dataclass
class Core:
    config: MasterConfig
    store: Store
    clock: Clock
    registry: NodeRegistry
    events: EventBus
    logs: LogStore
    learner: Learner
    live: LiveIndex = field(default_factory=LiveIndex)  # rebuilt from the store at start
    # Held while the cluster's placement changes hands: reconciliation, node loss, and a
    # scheduling pass's apply + dispatch. Never held across a policy decision.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    schedule_needed: asyncio.Event = field(default_factory=asyncio.Event)
    gangs: GangBook = field(default_factory=GangBook)  # multi-node attempts (issue 11)

    def poke(self) -> None:
        """Ask for a scheduling pass soon (coalesced). Without a schedulable node a pass could not
        place anything: the tick alone keeps the pending reasons current then."""
        if self.registry.any_schedulable():
            self.schedule_needed.set()

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
        write = asyncio.ensure_future(self.store.write(TransitionOp(todo)))
        write.add_done_callback(self._applied)
        changes = await asyncio.shield(write)
        self.events.publish_changes(changes)
        for node, job_id, attempt, reason in self.gangs.ended(changes, self.registry):
            self.send_kill(node, job_id, attempt, reason)  # the other parts of a gang that ended
        return changes

    def _applied(self, write: asyncio.Future[list[Change]]) -> None:
        if not write.cancelled() and write.exception() is None:
            self.live.update(c.after for c in write.result())

    async def set_pending_reason(self, reason: str) -> None:
        await self.store.write(SetPendingReasonOp(reason))
        self.live.set_pending_reason(reason)

    def send_assignment(self, job: Job) -> bool:
        if gang.is_gang(job):
            return self._send_gang(job)
        msg = wpb.MasterMessage(
            assign=wpb.Assignment(
                job_id=job.id, attempt=job.attempt, spec=wire.spec_to_pb(job.spec), gpus=list(job.gpus)
            )
        )
        sent = self.registry.send(job.node, msg)
        if not sent:
            log.info("assignment %s/%d waits for node %s to reconnect", job.id, job.attempt, job.node)
        return sent

    def _send_gang(self, job: Job) -> bool:
        """One Assignment per node part; each part that cannot be sent is never re-sent (the
        ack timeout takes the attempt back, as for a job on one node)."""
        sent = True
        for node, msg in self.gangs.assignments(job, self.registry):
            if not self.registry.send(node, msg):
                sent = False
                log.info("gang part %s/%d waits for node %s to reconnect", job.id, job.attempt, node)
        return sent

    def send_kill(self, node: str, job_id: str, attempt: int, reason: str) -> bool:
        msg = wpb.MasterMessage(kill=wpb.Kill(job_id=job_id, attempt=attempt, reason=reason))
        return self.registry.send(node, msg)
