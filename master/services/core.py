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
from master.services.events import EventBus
from master.services.learning import Learner
from master.services.logs import LogStore
from master.services.nodes import NodeRegistry
from master.store import Store
from master.store.jobs import Change, Transition, TransitionOp

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
        changes = await self.store.write(TransitionOp(todo))
        self.events.publish_changes(changes)
        return changes

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
