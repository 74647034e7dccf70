"""What a registered worker sends: heartbeats, attempt updates, logs and progress."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from horus_core.containment import Ending
from horus_core.gang import is_gang
from horus_core.model import JobState
from horus_core.plane import AttemptLog, AttemptProgress, AttemptUpdate, Heartbeat
from horus_core.policies.optimus.journal import ProgressPoint
from master.clock import Clock
from master.learning.learner import Learner
from master.services import transitions as tr
from master.services.core import Dispatcher, JobWriter, Wakeup
from master.services.gang_transitions import part_update
from master.services.logs import JOB_ID, LogStore
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.progress import ProgressKeeper
from master.services.service import ServiceDesk
from master.services.session import Session
from master.services.workers import WorkerPlane
from master.store.reads import Reader
from master.store.rows import JobRow

log = logging.getLogger(__name__)

KILL_REPEAT_S = 15.0  # a stale attempt still reported running gets another Kill after this long
STALE = "stale attempt: not current on this node"
_REPORTABLE = (JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


def point_of(msg: AttemptProgress) -> ProgressPoint:
    """A report as the journal keeps it; the wire's loss 0 means the job reported none."""
    loss = msg.loss if msg.loss > 0 else None
    return ProgressPoint(msg.attempt, msg.step, loss, msg.samples_per_s, msg.at)


class AttemptHandler:
    def __init__(
        self,
        *,
        plane: WorkerPlane,
        registry: NodeRegistry,
        clock: Clock,
        writer: JobWriter,
        dispatch: Dispatcher,
        wakeup: Wakeup,
        learner: Learner,
        logs: LogStore,
        read: Reader,
        progress: ProgressKeeper | None = None,
        service: ServiceDesk | None = None,
    ) -> None:
        self.plane = plane
        self.registry, self.clock, self.read = registry, clock, read
        self.writer, self.dispatch, self.wakeup = writer, dispatch, wakeup
        self.learner, self.logs = learner, logs
        self.journals = progress  # the jobs' progress journals (issue 12)
        self.service = service  # GPU readings with an Xid or ECC error: quarantine
        # Told (node, job id, attempt) of each final update from the attempt's node, once it is
        # applied (the scheduler: a preempted attempt has stopped). Must not block.
        self.finals: list[Callable[[str, str, int], None]] = []
        self._kills: dict[tuple[str, int], float] = {}
        self._log_nodes: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._log_parts: OrderedDict[tuple[str, int], str] = OrderedDict()  # a gang part's last log

    def touch(self, session: Session) -> NodeEntry | None:
        """Record that the node spoke; None if ``session`` is no longer the node's stream."""
        entry = self.registry.get(session.node)
        if entry is None or entry.session is not session:
            return None
        entry.last_heard = self.clock.now()
        return entry

    async def heartbeat(self, session: Session, hb: Heartbeat) -> None:
        entry = self.touch(session)
        if entry is None:
            return
        was_fenced = entry.fenced
        self.registry.record_heartbeat(entry, hb, self.clock.now())
        if self.service is not None and any(s.ecc_errors or s.xid_events for s in hb.gpus):
            await self.service.check_readings(entry, hb)
        if was_fenced and not entry.fenced:
            self.wakeup.poke()  # it takes work again
        self.plane.renew(entry, hb.seq)  # evidence the worker is alive: the only lease renewal
        learner = self.learner
        learner.on_heartbeat(entry.name, hb)
        rows = self.writer.live.active_on(entry.name) if entry.running else []
        learner.on_placement(entry.name, [r.job for r in rows], entry.running, entry.gpu_types())
        if entry.running:
            self._fence(entry, rows)

    def _fence(self, entry: NodeEntry, active: list[JobRow]) -> None:
        """Kill attempts the worker runs that are not current on this node (fencing)."""
        now = self.clock.now()
        current = {(r.job.id, r.job.attempt) for r in active if not r.cancel_requested}
        for key in entry.running - current:
            if now - self._kills.get(key, float("-inf")) >= KILL_REPEAT_S:
                self._kills[key] = now
                self.dispatch.kill(entry.name, key[0], key[1], STALE)
        if len(self._kills) > 10_000:
            self._kills = {k: t for k, t in self._kills.items() if now - t < KILL_REPEAT_S}

    async def update(self, session: Session, msg: AttemptUpdate) -> None:
        entry = self.touch(session)
        if entry is None:
            return
        state, exit_code = msg.state, msg.exit_code
        if state not in _REPORTABLE:
            log.warning("node %s sent an update with state %s; ignored", entry.name, state.value)
            return
        if (msg.job_id, msg.attempt) not in entry.owned:
            log.debug(
                "node %s reported %s/%d, not its registration's; ignored", entry.name, msg.job_id, msg.attempt
            )
            if state is JobState.RUNNING:
                self.dispatch.kill(entry.name, msg.job_id, msg.attempt, STALE)
            return
        verdict = tr.UpdateVerdict()
        now = self.clock.now()
        ending = Ending(msg.cause, msg.peak_gpu_memory_mib, msg.shared, msg.neighbour_over_cap)
        fn = part_update(entry.name, msg.attempt, state, exit_code, msg.reason[:1000], now, verdict, ending)
        changes = await self.writer.apply([(msg.job_id, fn)])
        if verdict.kill or (not verdict.seen and state is JobState.RUNNING):
            self.dispatch.kill(entry.name, msg.job_id, msg.attempt, STALE)
        if verdict.ended:
            entry.owned.discard((msg.job_id, msg.attempt))
            self.logs.forget(msg.job_id, msg.attempt)
            for c in changes:
                if not (is_gang(c.after.job) and c.after.job.state.active):  # (a gang goes on)
                    await self.learner.attempt_ended(c.before.job, msg.attempt, ending.peak_mib)
                if c.after.job.contained_mib > c.before.job.contained_mib:  # (docs/sharing.md)
                    log.warning("%s: %s", msg.job_id, c.after.job.reason)
                    await self.learner.grew(c.before.job, ending.peak_mib)
        if state is not JobState.RUNNING:
            for tell in self.finals:
                tell(entry.name, msg.job_id, msg.attempt)
        if changes:
            self.wakeup.poke()

    async def log(self, session: Session, msg: AttemptLog) -> None:
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
        await self.logs.append(msg.job_id, msg.attempt, msg.offset, msg.data, node=part)

    async def _gang_part(self, job_id: str, attempt: int, node: str) -> bool:
        """Whether ``node`` runs a part of the gang attempt (the live index, else the store)."""
        key = (job_id, attempt)
        if self._log_parts.get(key) == node:
            return True
        row = self.writer.live.get(job_id) or await self.read.job(job_id)
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
            node = await self.read.attempt_node(job_id, attempt)
            if node is None:
                return None
            self._log_nodes[key] = node
            while len(self._log_nodes) > 10_000:
                self._log_nodes.popitem(last=False)
        return node

    def progress(self, session: Session, msg: AttemptProgress) -> None:
        entry = self.touch(session)
        if entry is not None and (msg.job_id, msg.attempt) in entry.owned and JOB_ID.match(msg.job_id):
            self.learner.on_progress(entry.name, msg)
            if self.journals is not None:
                self.journals.record(msg.job_id, point_of(msg))
