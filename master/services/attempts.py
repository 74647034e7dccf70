"""What a registered worker sends: heartbeats, attempt updates, logs and progress."""

from __future__ import annotations

import logging
from collections import OrderedDict

from horus_core.errors import InvalidArgument
from horus_core.gang import is_gang
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import JobState
from horus_core.wire import job_state_from_pb
from master.services import transitions as tr
from master.services.core import Core
from master.services.gang_transitions import part_update
from master.services.logs import JOB_ID
from master.services.nodes import NodeEntry
from master.services.session import Session
from master.services.workers import WorkerPlane
from master.store.rows import JobRow

log = logging.getLogger(__name__)

KILL_REPEAT_S = 15.0  # a stale attempt still reported running gets another Kill after this long
STALE = "stale attempt: not current on this node"
_REPORTABLE = (JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class AttemptHandler:
    def __init__(self, core: Core, plane: WorkerPlane) -> None:
        self.core = core
        self.plane = plane
        self._kills: dict[tuple[str, int], float] = {}
        self._log_nodes: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._log_parts: OrderedDict[tuple[str, int], str] = OrderedDict()  # a gang part's last log

    def touch(self, session: Session) -> NodeEntry | None:
        """Record that the node spoke; None if ``session`` is no longer the node's stream."""
        entry = self.core.registry.get(session.node)
        if entry is None or entry.session is not session:
            return None
        entry.last_heard = self.core.clock.now()
        return entry

    async def heartbeat(self, session: Session, hb: wpb.Heartbeat) -> None:
        entry = self.touch(session)
        if entry is None:
            return
        was_fenced = entry.fenced
        self.core.registry.record_heartbeat(entry, hb, self.core.clock.now())
        if was_fenced and not entry.fenced:
            self.core.poke()  # it takes work again
        self.plane.renew(entry, hb.seq)  # evidence the worker is alive: the only lease renewal
        learner = self.core.learner
        learner.on_heartbeat(entry.name, hb)
        rows = self.core.live.active_on(entry.name) if entry.running else []
        learner.on_placement(entry.name, [r.job for r in rows], entry.running, entry.gpu_types())
        if entry.running:
            self._fence(entry, rows)

    def _fence(self, entry: NodeEntry, active: list[JobRow]) -> None:
        """Kill attempts the worker runs that are not current on this node (fencing)."""
        now = self.core.clock.now()
        current = {(r.job.id, r.job.attempt) for r in active if not r.cancel_requested}
        for key in entry.running - current:
            if now - self._kills.get(key, float("-inf")) >= KILL_REPEAT_S:
                self._kills[key] = now
                self.core.send_kill(entry.name, key[0], key[1], STALE)
        if len(self._kills) > 10_000:
            self._kills = {k: t for k, t in self._kills.items() if now - t < KILL_REPEAT_S}

    async def update(self, session: Session, msg: wpb.AttemptUpdate) -> None:
        entry = self.touch(session)
        if entry is None:
            return
        try:
            state = job_state_from_pb(msg.state)
        except InvalidArgument:
            state = JobState.PENDING
        if state not in _REPORTABLE:
            log.warning("node %s sent an update with state %d; ignored", entry.name, msg.state)
            return
        exit_code = msg.exit_code if msg.HasField("exit_code") else None
        if (msg.job_id, msg.attempt) not in entry.owned:
            log.debug(
                "node %s reported %s/%d, not its registration's; ignored", entry.name, msg.job_id, msg.attempt
            )
            if state is JobState.RUNNING:
                self.core.send_kill(entry.name, msg.job_id, msg.attempt, STALE)
            return
        verdict = tr.UpdateVerdict()
        now = self.core.clock.now()
        fn = part_update(entry.name, msg.attempt, state, exit_code, msg.reason[:1000], now, verdict)
        changes = await self.core.apply([(msg.job_id, fn)])
        if verdict.kill or (not verdict.seen and state is JobState.RUNNING):
            self.core.send_kill(entry.name, msg.job_id, msg.attempt, STALE)
        if verdict.ended:
            entry.owned.discard((msg.job_id, msg.attempt))
            self.core.logs.forget(msg.job_id, msg.attempt)
            for c in changes:
                if not (is_gang(c.after.job) and c.after.job.state.active):  # (a gang goes on)
                    await self.core.learner.attempt_ended(c.before.job, msg.attempt)
        if changes:
            self.core.poke()

    async def log(self, session: Session, msg: wpb.AttemptLog) -> None:
        entry = self.touch(session)
        if entry is None or not JOB_ID.match(msg.job_id) or msg.attempt < 1 or msg.offset < 0:
            return
        if (msg.job_id, msg.attempt) not in entry.owned:  # not this registration's attempt
            return
        rank0 = await self._attempt_node(msg.job_id, msg.attempt)
        part = "" if rank0 == entry.name else entry.name  # a gang's other parts: a log each
        if part and not await self._gang_part(msg.job_id, msg.attempt, entry.name):
            log.debug("node %s sent logs of %s/%d, not its attempt", entry.name, msg.job_id, msg.attempt)
            return
        self.core.logs.append(msg.job_id, msg.attempt, msg.offset, msg.data, node=part)

    async def _gang_part(self, job_id: str, attempt: int, node: str) -> bool:
        """Whether ``node`` runs a part of the gang attempt (the live index, else the store)."""
        key = (job_id, attempt)
        if self._log_parts.get(key) == node:
            return True
        row = self.core.live.get(job_id) or await self.core.store.read.job(job_id)
        if row is None or row.job.attempt != attempt or node not in row.job.nodes:
            return False
        self._log_parts[key] = node
        while len(self._log_parts) > 10_000:
            self._log_parts.popitem(last=False)
        return True

    async def _attempt_node(self, job_id: str, attempt: int) -> str | None:
        key = (job_id, attempt)
        node = self._log_nodes.get(key)
        if node is None:
            node = await self.core.store.read.attempt_node(job_id, attempt)
            if node is None:
                return None
            self._log_nodes[key] = node
            while len(self._log_nodes) > 10_000:
                self._log_nodes.popitem(last=False)
        return node

    def progress(self, session: Session, msg: wpb.AttemptProgress) -> None:
        entry = self.touch(session)
        if entry is not None and (msg.job_id, msg.attempt) in entry.owned and JOB_ID.match(msg.job_id):
            self.core.learner.on_progress(entry.name, msg)

    async def handle(self, session: Session, msg: wpb.WorkerMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "heartbeat":
            await self.heartbeat(session, msg.heartbeat)
        elif kind == "update":
            await self.update(session, msg.update)
        elif kind == "log":
            await self.log(session, msg.log)
        elif kind == "progress":
            self.progress(session, msg.progress)
        else:
            self.touch(session)
            log.warning("node %s sent an unexpected %s message; ignored", session.node, kind)
