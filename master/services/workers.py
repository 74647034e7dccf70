"""The worker plane: registration, reconciliation and liveness (docs/protocol.md).

Each registration gets a random epoch. A worker that presents its node's current epoch (and the
same identity) continues that node: its finals and running attempts count. Anyone else who
registers the name (allowed only once the old node is LOST, or its identity is the same) starts
afresh: what it claims to run is killed, its finals are ignored, and the node's attempts go back
to the queue. Liveness: a node silent for ``node_timeout_s`` is LOST; an assignment that no
heartbeat acknowledged within ``ack_timeout_s`` is taken back (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import secrets
from dataclasses import dataclass

from horus_core import gang
from horus_core.containment import Ending
from horus_core.errors import AlreadyExists, InvalidArgument, PermissionDenied, Unauthenticated
from horus_core.model import Gpu, JobState, NodeState, SlurmTag
from horus_core.plane import LeaseGrant
from master.clock import Clock
from master.config import MasterConfig
from master.learning.learner import Learner
from master.services import transitions as tr
from master.services.core import Dispatcher, JobWriter, Wakeup
from master.services.gang_transitions import part_update
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.session import Session
from master.services.transitions import NO_ENDING
from master.store import Store
from master.store.jobs import Change, Transition
from master.store.nodes import SetNodeStateOp, UpsertNodeOp
from master.store.rows import JobRow

log = logging.getLogger(__name__)

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ADDR = re.compile(r"^[A-Za-z0-9._:%-]{0,255}$")  # a host name, IPv4 or IPv6 address ("" = unknown)
MAX_GPUS_PER_NODE = 256
MAX_FINISHED = 10_000
_FINAL_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class FinalUpdate:
    """The final update of an attempt, re-sent by the worker in its registration."""

    job_id: str
    attempt: int
    state: JobState
    exit_code: int | None
    reason: str
    ending: Ending = NO_ENDING  # its sharing facts (docs/sharing.md)


@dataclass(frozen=True)
class Registration:
    name: str
    gpus: tuple[Gpu, ...]
    running: tuple[tuple[str, int], ...]
    token: str = ""
    version: str = ""
    finished: tuple[FinalUpdate, ...] = ()
    identity: str = "anonymous"  # "cert:<CN>" under mutual TLS, "join-token", or "anonymous"
    resume_epoch: int = 0
    advertise_addr: str = ""  # where other nodes reach it (its own flag, else the peer address)
    rack: str = ""  # horus-worker --rack (issue 11)
    runtime: str = ""  # how it runs jobs: "process" or "docker" ("": not said, an older worker)
    slurm: SlurmTag | None = None  # a Slurm pilot's job (horus-worker --slurm, docs/slurm.md)


class WorkerPlane:
    def __init__(
        self,
        *,
        config: MasterConfig,
        store: Store,
        clock: Clock,
        registry: NodeRegistry,
        writer: JobWriter,
        dispatch: Dispatcher,
        wakeup: Wakeup,
        learner: Learner,
        lock: asyncio.Lock,
    ) -> None:
        self.config, self.store, self.clock, self.registry = config, store, clock, registry
        self.writer, self.dispatch, self.wakeup = writer, dispatch, wakeup
        self.learner = learner
        self.lock = lock  # the placement lock (shared with the scheduler's apply + dispatch)
        self._next_ack_check = 0.0

    async def load(self) -> None:
        """After a (re)start: every known node gets ``node_timeout_s`` of grace to re-register."""
        now = self.clock.now()
        for row in await self.store.read.nodes():
            entry = NodeEntry(row.name, row.gpus, row.state, now, row.version)
            entry.rack = row.rack
            self.registry.put(entry)
        for job in await self.store.read.active_jobs():
            for name in gang.job_nodes(job.job):  # (every node of a gang)
                if self.registry.get(name) is None:
                    self.registry.put(NodeEntry(name, (), NodeState.LOST, now))

    def _check(self, reg: Registration) -> None:
        want = self.config.join_token
        if want is not None and not hmac.compare_digest(reg.token.encode(), want.encode()):
            raise Unauthenticated("bad or missing join token")
        if not NODE_NAME.match(reg.name):
            raise InvalidArgument("register.name", f"not a valid node name: {reg.name[:80]!r}")
        uuids = [g.uuid for g in reg.gpus]
        if len(uuids) > MAX_GPUS_PER_NODE:
            raise InvalidArgument("register.gpus", f"at most {MAX_GPUS_PER_NODE} GPUs per node")
        if len(set(uuids)) != len(uuids) or any(not u or len(u) > 128 for u in uuids):
            raise InvalidArgument("register.gpus", "GPU UUIDs must be unique, non-empty and short")
        for g in reg.gpus:
            if len(g.model) > 256 or len(g.gpu_type) > 64 or g.memory_mib < 0 or g.index < 0:
                raise InvalidArgument("register.gpus", f"bad description of GPU {g.uuid}")
        if len(reg.version) > 128:
            raise InvalidArgument("register.version", "at most 128 characters")
        if not ADDR.match(reg.advertise_addr):
            raise InvalidArgument(
                "register.advertise_addr", f"not a host name or address: {reg.advertise_addr[:80]!r}"
            )
        if reg.rack and not NODE_NAME.match(reg.rack):
            raise InvalidArgument("register.rack", f"not a valid rack name: {reg.rack[:80]!r}")
        if reg.slurm is not None and not NODE_NAME.match(reg.slurm.job_id):
            raise InvalidArgument("register.slurm.job_id", f"not a Slurm job id: {reg.slurm.job_id[:80]!r}")
        if reg.runtime and not NODE_NAME.match(reg.runtime):
            raise InvalidArgument("register.runtime", f"not a runtime name: {reg.runtime[:80]!r}")
        for uuid in uuids:
            other = self.registry.owner_of_gpu(uuid)
            if other is not None and other != reg.name:
                raise AlreadyExists(f"GPU {uuid} is already registered by node {other}")

    async def register(self, reg: Registration) -> Session:
        self._check(reg)
        async with self.lock:
            old = self.registry.get(reg.name)
            continues = self._continues(old, reg)
            now = self.clock.now()
            await self.store.write(
                UpsertNodeOp(reg.name, reg.gpus, NodeState.READY, reg.version, now, reg.rack)
            )
            session = Session(reg.name, self.config.session_queue)
            entry = NodeEntry(
                reg.name, reg.gpus, NodeState.READY, now, reg.version, session, registered_at=now
            )
            entry.identity, entry.epoch = reg.identity, secrets.randbits(63) | 1
            entry.advertise_addr = reg.advertise_addr
            entry.rack, entry.runtime, entry.slurm = reg.rack, reg.runtime, reg.slurm
            self.registry.put(entry)
            session.send(self._registered(epoch=entry.epoch))
            log.info(
                "node %s registered (%d GPUs, %d running, %s, %s)",
                reg.name,
                len(reg.gpus),
                len(reg.running),
                reg.identity,
                "resumed" if continues else "new epoch",
            )
            if continues:
                entry.owned.update((f.job_id, f.attempt) for f in reg.finished)  # their last log chunks
                await self._apply_finals(entry.name, reg.finished)
                await self._reconcile(entry, reg.running, ())
            else:
                await self._reconcile(entry, (), reg.running)
        self.wakeup.poke()
        return session

    def _continues(self, old: NodeEntry | None, reg: Registration) -> bool:
        """Whether ``reg`` continues the node's previous registration (may report its attempts);
        raises if the name is held by a live node."""
        if old is None:
            return True
        if old.connected:
            raise AlreadyExists(f"node {reg.name} is already connected on another stream")
        if old.state is not NodeState.LOST and old.identity and old.identity != reg.identity:
            raise PermissionDenied(f"node name {reg.name} is held by a live node of another identity")
        if old.epoch == 0:  # loaded after a master restart: nothing to check against
            return True
        if old.identity == reg.identity and reg.resume_epoch == old.epoch:
            return True
        log.warning("node %s: a new worker takes the name; its claims do not count", reg.name)
        return False

    async def _apply_finals(self, node: str, finished: tuple[FinalUpdate, ...]) -> None:
        """Results that ended while the stream was down count before anything is declared lost."""
        now = self.clock.now()
        todo = [
            (
                f.job_id,
                part_update(
                    node, f.attempt, f.state, f.exit_code, f.reason, now, tr.UpdateVerdict(), f.ending
                ),
            )
            for f in finished
            if f.state in _FINAL_STATES and f.attempt >= 1
        ]
        if todo:
            await self._ended(await self.writer.apply(todo))

    async def _reconcile(
        self, entry: NodeEntry, running: tuple[tuple[str, int], ...], disowned: tuple[tuple[str, int], ...]
    ) -> None:
        """Kill what the worker runs that is not current; re-queue what it does not run.

        An attempt the master has ASSIGNED or RUNNING here that the worker neither runs nor reported
        finished (its finals came with the registration) is lost: it goes back to the queue and its
        next assignment is a new attempt. An Assignment is never sent twice, so no attempt can start
        twice, even on a worker that restarted and forgot what it ran. ``disowned``: what a new
        worker under the name claims to run; it is killed and nothing of it counts.
        """
        now = self.clock.now()
        active = {r.job.id: r for r in await self.store.read.active_jobs(entry.name)}
        reported = set(running)
        kills = [(j, a, "not this worker's attempt: a new worker took the node's name") for j, a in disowned]
        for job_id, attempt in sorted(reported):
            row = active.get(job_id)
            if row is None or row.job.attempt != attempt:
                kills.append((job_id, attempt, "stale attempt: not current on this node"))
            elif row.cancel_requested:
                kills.append((job_id, attempt, row.job.reason))
        todo: list[tuple[str, Transition]] = []
        for row in active.values():
            if (row.job.id, row.job.attempt) in reported:
                entry.owned.add((row.job.id, row.job.attempt))
                continue
            if not gang.part_active(row.job, row.parts, entry.name):
                continue  # its part here ended (reported in the finals); the others go on
            if row.job.state is JobState.ASSIGNED and row.cancel_requested:
                todo.append((row.job.id, tr.cancel_unstarted(now)))
            else:
                entry.unreported.add((row.job.id, row.job.attempt))
        changes = await self.writer.apply(todo)
        for job_id, attempt, reason in kills:
            self.dispatch.kill(entry.name, job_id, attempt, reason)
        await self._ended(changes)
        await self.settle(entry)

    async def settle(self, entry: NodeEntry) -> None:
        """Re-queue the attempts the worker did not report when it registered (after its finals)."""
        if not entry.unreported:
            return
        keys, entry.unreported = sorted(entry.unreported), set()
        now = self.clock.now()
        changes = await self.writer.apply(
            (
                job_id,
                tr.requeue(
                    "attempt {attempt} lost: not running on {node} when it registered",
                    now,
                    node=entry.name,
                    attempt=attempt,
                ),
            )
            for job_id, attempt in keys
        )
        await self._ended(changes)
        if changes:
            self.wakeup.poke()

    async def _ended(self, changes: list[Change]) -> None:
        for c in changes:
            peak = c.after.job.gpu_memory_peak_mib
            await self.learner.attempt_ended(c.before.job, c.before.job.attempt, peak)
            if c.after.job.contained_mib > c.before.job.contained_mib:  # (docs/sharing.md)
                await self.learner.grew(c.before.job, peak)

    def disconnected(self, session: Session) -> None:
        session.close("stream ended", by_peer=True)  # no-op if already closed
        entry = self.registry.get(session.node)
        if entry is not None and entry.session is session:
            entry.session = None
            log.info(
                "node %s disconnected; LOST unless it is back within %g s",
                session.node,
                self.config.node_timeout_s,
            )

    async def check_liveness(self) -> None:
        """Nodes silent for ``node_timeout_s`` are LOST and their attempts go back to the queue.
        Leases are renewed only in answer to heartbeats (:meth:`AttemptHandler.heartbeat`), so a
        worker whose messages no longer reach the master fences itself before it is declared LOST."""
        for entry in self.registry.all():
            if self._expired(entry):
                await self._lose(entry)
        now = self.clock.now()
        if now >= self._next_ack_check:
            self._next_ack_check = now + self.config.ack_timeout_s / 8
            await self.take_back_unacknowledged()

    def _assigned_on_connected(self) -> list[JobRow]:
        """The ASSIGNED jobs with a part on a connected node, from the live index (no read of the
        database: the check runs every ``ack_timeout_s / 8`` while any assignment is unacknowledged,
        which in a busy cluster is most of the time)."""
        live, assigned = self.writer.live, JobState.ASSIGNED
        rows = (r for e in self.registry.all() if e.connected for r in live.active_on(e.name))
        return list({r.job.id: r for r in rows if r.job.state is assigned}.values())

    async def take_back_unacknowledged(self) -> None:
        """ASSIGNED attempts of connected nodes that no heartbeat listed for ``ack_timeout_s`` since
        their assignment go back to the queue; a Kill fences them in case they arrive after all."""
        now = self.clock.now()
        if not any(e.connected and e.owned - e.running for e in self.registry.all()):
            return  # every attempt sent on a live stream is listed in its heartbeats: nothing to read
        late: list[tuple[str, int, str]] = []
        async with self.lock:
            for row in self._assigned_on_connected():
                job = row.job
                if now - job.updated_at < self.config.ack_timeout_s:
                    continue
                for node in gang.job_nodes(job):  # (a gang: every part must be acknowledged)
                    entry = self.registry.get(node)
                    if entry is None or not entry.connected or not gang.part_active(job, row.parts, node):
                        continue  # a disconnected node's attempts are settled when it registers or is lost
                    if (job.id, job.attempt) not in entry.running:
                        late.append((job.id, job.attempt, node))
                        break
            reason = (
                f"attempt {{attempt}} not acknowledged by {{node}} within {self.config.ack_timeout_s:g} s"
            )
            changes = await self.writer.apply(
                (j, tr.requeue(reason, now, node=n, attempt=a)) for j, a, n in late
            )
            for job_id, attempt, node in late:
                self.dispatch.kill(node, job_id, attempt, "assignment taken back: not acknowledged in time")
                if (entry := self.registry.get(node)) is not None:
                    entry.owned.discard((job_id, attempt))
        if late:
            log.warning("took back %d unacknowledged assignment(s): %s", len(late), [j for j, _, _ in late])
        await self._ended(changes)
        if changes:
            self.wakeup.poke()

    def _registered(self, *, epoch: int = 0, renews_seq: int = 0) -> LeaseGrant:
        cfg = self.config
        return LeaseGrant(cfg.heartbeat_s, cfg.lease_s, epoch, renews_seq, cfg.kill_grace)

    def renew(self, entry: NodeEntry, seq: int) -> None:
        """The lease renewal that answers a heartbeat: the worker counts it from that heartbeat."""
        if entry.session is not None:
            entry.session.send(self._registered(renews_seq=seq))

    def _expired(self, entry: NodeEntry) -> bool:
        now = self.clock.now()
        return not entry.lost_handled and now - entry.last_heard >= self.config.node_timeout_s

    async def _lose(self, entry: NodeEntry) -> None:
        async with self.lock:
            if self.registry.get(entry.name) is not entry or not self._expired(entry):
                return  # re-registered or heard from meanwhile
            why = f"node {entry.name} sent nothing for {self.config.node_timeout_s:g} s"
            if entry.session is not None:
                entry.session.close(why)
                entry.session = None
            entry.state, entry.lost_handled = NodeState.LOST, True
            log.warning("%s: LOST", why)
            await self.store.write(SetNodeStateOp(entry.name, NodeState.LOST, entry.last_heard))
            rows = await self.store.read.active_jobs(entry.name)
            now = self.clock.now()
            changes = await self.writer.apply(
                (
                    r.job.id,
                    tr.requeue(
                        "attempt {attempt} lost: node {node} lost",
                        now,
                        node=entry.name,
                        attempt=r.job.attempt,
                    ),
                )
                for r in rows
            )
        await self._ended(changes)
        self.wakeup.poke()
