"""What the services share: the store, the node registry, events, logs, the clock and the lock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from horus_core import wire
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import Job
from master.clock import Clock
from master.config import MasterConfig
from master.services.active import ActiveByNode
from master.services.events import EventBus
from master.services.learning import Learner
from master.services.logs import LogStore
from master.services.nodes import NodeRegistry
from master.store import Store
from master.store.jobs import Change, Transition, TransitionOp
from master.store.rows import JobRow

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
    # Held while the cluster's placement changes hands: reconciliation, node loss, and a
    # scheduling pass's apply + dispatch. Never held across a policy decision.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    schedule_needed: asyncio.Event = field(default_factory=asyncio.Event)
    active: ActiveByNode = field(init=False, repr=False)  # each node's active jobs, in memory

    def __post_init__(self) -> None:
        self.active = ActiveByNode(lambda node: self.store.read.active_jobs(node))

    def poke(self) -> None:
        """Ask for a scheduling pass soon (coalesced). Without a schedulable node a pass could not
        place anything: the tick alone keeps the pending reasons current then."""
        if self.registry.any_schedulable():
            self.schedule_needed.set()

    async def apply(self, transitions: Iterable[tuple[str, Transition]]) -> list[Change]:
        """Commit the transitions in one transaction, then tell the watchers."""
        todo = tuple(transitions)
        if not todo:
            return []
        # A caller that goes away does not stop the write (see Writer.submit): the active jobs
        # in memory follow it when it ends, whoever still waits for it.
        write = asyncio.ensure_future(self.store.write(TransitionOp(todo)))
        write.add_done_callback(self._written)
        changes = await asyncio.shield(write)
        self.events.publish_changes(changes)
        return changes

    def _written(self, write: asyncio.Future[list[Change]]) -> None:
        if write.cancelled() or write.exception() is not None:  # its effect is unknown
            self.active.unknown()
        else:
            self.active.written(write.result())

    async def active_on(self, node: str) -> list[JobRow]:
        """The node's ASSIGNED and RUNNING jobs, as ``store.read.active_jobs(node)``."""
        return await self.active.get(node)

    def send_assignment(self, job: Job) -> bool:
        msg = wpb.MasterMessage(
            assign=wpb.Assignment(
                job_id=job.id, attempt=job.attempt, spec=wire.spec_to_pb(job.spec), gpus=list(job.gpus)
            )
        )
        sent = self.registry.send(job.node, msg)
        if not sent:
            log.info("assignment %s/%d waits for node %s to reconnect", job.id, job.attempt, job.node)
        return sent

    def send_kill(self, node: str, job_id: str, attempt: int, reason: str) -> bool:
        msg = wpb.MasterMessage(kill=wpb.Kill(job_id=job_id, attempt=attempt, reason=reason))
        return self.registry.send(node, msg)
