"""The scheduling loop: the live index's jobs -> ``policy.decide`` (off the loop) -> apply -> dispatch.

A pass runs when something changed (a submission, a finished attempt, a node coming or going:
:meth:`Wakeup.poke`, coalesced) and every ``tick_s``; after a slow pass the loop first rests as long
as the pass took (:func:`rest_after`). Each tick also checks node liveness. All the changes of a
pass commit in one short transaction; Assignments and Kills go out only after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from horus_core import gang
from horus_core import reasoncodes as rc
from horus_core.advice import DOCKER, runtime_gate
from horus_core.caps import attempt_cap
from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState, Node, NodeState
from horus_core.policies import Policy
from horus_core.policies.base import Reports, hide_gpus, progress_of
from horus_core.policies.checks import Plan, check_actions
from master.clock import Clock
from master.config import MasterConfig
from master.learning.learner import Learner
from master.services import transitions as tr
from master.services.core import Dispatcher, JobWriter, Wakeup
from master.services.floor import FloorEnforcer
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.progress import ProgressKeeper
from master.services.service import ServiceDesk
from master.store.jobs import Change, Transition
from master.store.live import IndexLookup

log = logging.getLogger(__name__)

NO_NODES = "no ready nodes"
ALL_CORDONED = "every ready node is cordoned or draining"
SLOW_PASS_S = 0.05


def rest_after(pass_s: float, tick_s: float) -> float:
    """How long the loop waits before the next pass: as long as a slow pass took (at most a
    tick), so that under a stream of submissions passes take at most half the master's time and
    heartbeats and RPCs keep the rest (bench/load.py). Fast passes follow each other at once."""
    return min(pass_s, tick_s) if pass_s >= SLOW_PASS_S else 0.0


def gang_nodes(a: Assign, gpu_nodes: Mapping[str, str]) -> tuple[str, ...] | None:
    """The nodes of an assign in rank order when its GPUs span several (else ()); None when
    they are not listed node by node starting with ``a.node`` (the contract of Assign)."""
    if all(gpu_nodes.get(u) == a.node for u in a.gpus):
        return ()
    try:
        nodes = tuple(node for node, _ in gang.split(a.gpus, gpu_nodes))
    except ValueError:
        return None
    return nodes if nodes[0] == a.node else None


@dataclass
class PassResult:
    assigned: int = 0
    preempted: int = 0
    waiting: int = 0
    dropped: int = 0
    skipped: bool = False
    # Wall time of the pass's phases (what bench/master_pass.py reports): reading the live jobs,
    # the policy's decide(), checking and committing (apply, dispatch, ended attempts).
    read_s: float = 0.0
    decide_s: float = 0.0
    commit_s: float = 0.0


class Scheduler:
    def __init__(
        self,
        *,
        config: MasterConfig,
        clock: Clock,
        registry: NodeRegistry,
        writer: JobWriter,
        dispatch: Dispatcher,
        wakeup: Wakeup,
        learner: Learner,
        lock: asyncio.Lock,
        policy: Policy,
        liveness: Callable[[], Awaitable[None]],
        floor: FloorEnforcer,
        progress: ProgressKeeper | None = None,
        service: ServiceDesk | None = None,
        positions: Callable[[rc.QueuePositions], None] | None = None,
    ) -> None:
        self.config, self.clock, self.registry, self.learner = config, clock, registry, learner
        self.writer, self.dispatch, self.wakeup = writer, dispatch, wakeup
        self.lock = lock  # the placement lock: held over a pass's apply + dispatch
        self.policy = policy
        self._liveness = liveness
        self._last_idle_note = float("-inf")
        self._pass_lock = asyncio.Lock()  # one pass at a time: a pass's snapshot stays valid
        # Parts of attempts told to stop that may still run: their GPUs are offered to no one until
        # they stopped, so no job starts next to a process still checkpointing (shared with the
        # gang book, which adds the parts of gang attempts that ended).
        self.stopping = dispatch.gangs.stopping
        self.passes = 0
        # Called after each pass with its duration (s) and result (the metrics); must not block.
        self.observers: list[Callable[[float, PassResult], None]] = []
        self._rest_s = 0.0
        self.floor = floor  # speed floors: co-runners to move (issue 10)
        self.progress = progress  # the jobs' progress journals (issue 12)
        self.service = service  # drains whose timeout passed: jobs to preempt
        # Each pass's queue positions go here (what ``hctl queue`` shows).
        self.positions = positions or (lambda _p: None)

    @property
    def pass_lock(self) -> asyncio.Lock:
        """Held by a pass from its snapshot to its commit (a queue reload waits for it)."""
        return self._pass_lock

    async def run(self) -> None:
        """Forever (until cancelled): wait for a poke or the tick, then liveness + a pass."""
        while True:
            await self._wait()
            started = time.perf_counter()
            try:
                await self._liveness()
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduling pass failed; the next tick retries")
            self._rest_s = rest_after(time.perf_counter() - started, self.config.tick_s)

    async def _wait(self) -> None:
        if self._rest_s > 0:  # (real time: what the last pass really cost; pokes meanwhile coalesce)
            await asyncio.sleep(self._rest_s)
        ev = self.wakeup.needed
        if not ev.is_set():
            poked = asyncio.ensure_future(ev.wait())
            tick = asyncio.ensure_future(self.clock.sleep(self.config.tick_s))
            try:
                await asyncio.wait((poked, tick), return_when=asyncio.FIRST_COMPLETED)
            finally:
                poked.cancel()
                tick.cancel()
        ev.clear()

    async def run_once(self) -> PassResult:
        await self.learner.checkpoint()  # (every minute: stores what running attempts measured)
        await self._save_progress()
        async with self._pass_lock:
            self.learner.apply_observations()  # no policy is running now
            self._observe_progress()
            started = time.perf_counter()
            result = await self._pass()
            for fn in self.observers:
                fn(time.perf_counter() - started, result)
            return result

    async def _save_progress(self) -> None:
        keeper = self.progress
        if keeper is not None:
            keeper.prune(lambda job_id: self.writer.live.get(job_id) is not None)
            await keeper.save()

    def _observe_progress(self) -> None:
        """Hand the progress reports since the last pass to a policy that wants them (optimus)."""
        keeper = self.progress
        if keeper is None:
            return
        seen = keeper.take_observations()
        hearer = progress_of(self.policy)
        if hearer is not None and seen:
            hearer.hear(Reports.of(seen))

    async def _pass(self) -> PassResult:
        self.passes += 1
        nodes = self.registry.schedulable()
        now = self.clock.now()
        drains: list[Action] = [*self.service.drain_preempts()] if self.service is not None else []
        if not nodes:
            await self._idle_note(now)
            if drains:
                await self._commit(ClusterSnapshot((), self.writer.live.jobs()), drains)
            return PassResult(skipped=True)
        t0 = time.perf_counter()
        self.stopping.prune(self.registry)
        nodes = self._hide_stopping_gpus(nodes)
        live = self.writer.live
        snapshot = ClusterSnapshot.split_as(nodes, live.jobs(), live.split(), live.handout())
        t1 = time.perf_counter()
        process = {n for n, r in self.registry.runtimes().items() if r != DOCKER}
        gate = (process, self.registry.gpu_nodes())
        actions = await asyncio.to_thread(self._decide, snapshot, now, self._withheld(), gate)
        self.positions(rc.QueuePositions(actions, self.writer.live.job))
        actions = [*actions, *await self.floor.preempts(), *drains]
        t2 = time.perf_counter()
        plan, _ = await self._commit(snapshot, actions)
        done = PassResult(len(plan.assigns), len(plan.preempts), len(plan.waits), len(plan.dropped))
        done.read_s, done.decide_s, done.commit_s = t1 - t0, t2 - t1, time.perf_counter() - t2
        return done

    async def _idle_note(self, now: float) -> None:
        """No schedulable node: say so on every pending job (at most once a tick)."""
        if now - self._last_idle_note < self.config.tick_s:
            return
        self._last_idle_note = now
        if any(_only_cordoned(e) for e in self.registry.all()):
            await self.writer.set_pending_reason(ALL_CORDONED, rc.NODE_CORDONED)
        else:
            await self.writer.set_pending_reason(NO_NODES, rc.NO_READY_NODES)

    def _withheld(self) -> rc.OutOfService:
        """What cordons, drains and quarantines hold back now (nothing, cheaply, without any)."""
        book = self.registry.book
        if not (book.modes or book.quarantined):
            return rc.OutOfService()
        held = {n for n in book.modes} | {n for n, _ in book.quarantined.values()}
        live = self.writer.live
        jobs = [r.job for n in held for r in live.active_on(n)]
        nodes = [e.model() for e in self.registry.all() if e.name in held]
        return rc.out_of_service(nodes, jobs, self.stopping.gpus())  # (a stopping attempt's GPU is in use)

    def _decide(
        self,
        snapshot: ClusterSnapshot,
        now: float,
        withheld: rc.OutOfService,
        gate: tuple[set[str], Mapping[str, str]] | None = None,
    ) -> list[Action]:
        """(Off the loop.) The policy's actions, each Wait's code final: NodeCordoned where only
        room that is out of service would fit the job; a job with an image kept off the nodes
        whose workers run processes (``gate``: those nodes, and GPU uuid -> node)."""
        actions = self.policy.decide(snapshot, now)
        if gate is not None and gate[0]:
            actions = runtime_gate(actions, lambda j: snapshot.by_id().get(j), *gate)
        return rc.classify(actions, snapshot.pending(), withheld) if withheld.any else actions

    async def _commit(self, snapshot: ClusterSnapshot, actions: list[Action]) -> tuple[Plan, list[Change]]:
        """Check the actions, apply them in one transaction, dispatch after it."""
        plan = check_actions(snapshot, list(actions), IndexLookup(self.writer.live, snapshot.nodes))
        self._hold_stopping(plan)
        caps = self._caps(plan)
        todo = self._transitions(plan, self.clock.now(), self.registry.gpu_nodes(), caps)
        async with self.lock:
            changes = await self.writer.apply(todo)
            self._dispatch(changes, {a.job_id: a for a in plan.assigns})
        for c in changes:
            if c.before.job.state.active and not c.after.job.state.active:
                await self.learner.attempt_ended(c.before.job, c.before.job.attempt)
        return plan, changes

    def _caps(self, plan: Plan) -> dict[str, int]:
        """Each assigned attempt's GPU memory cap (docs/sharing.md): the declared one, else the
        footprint the packing counted for its workload; none for a job with its GPUs to itself."""
        caps: dict[str, int] = {}
        for a in plan.assigns:
            row = self.writer.live.get(a.job_id)
            if row is not None and not row.job.spec.exclusive:
                spec = row.job.spec
                caps[a.job_id] = attempt_cap(spec, self.learner.footprint(spec))
        return caps

    @staticmethod
    def _transitions(
        plan: Plan, now: float, gpu_nodes: Mapping[str, str], caps: Mapping[str, int] | None = None
    ) -> list[tuple[str, Transition]]:
        """The plan as transitions (``plan.waits`` holds only the Waits with a new reason); an
        assign whose GPUs span nodes starts a gang attempt on those nodes, in rank order;
        ``caps``: the assigned attempts' GPU memory caps (none: 0)."""
        caps = caps or {}
        todo: list[tuple[str, Transition]] = []
        for a in plan.assigns:
            nodes = gang_nodes(a, gpu_nodes)
            if nodes is None:
                log.warning("policy action dropped: %s (GPUs not in rank order from its node)", a)
                continue
            cap = caps.get(a.job_id, 0)
            todo.append((a.job_id, tr.assign(a.node, a.gpus, a.predicted_slowdown, now, nodes, cap)))
        todo += [(p.job_id, tr.preempt(p.reason, now)) for p in plan.preempts]
        todo += [(w.job_id, tr.set_wait_reason(w.reason, now, w.code)) for w in plan.waits]
        return todo

    def attempt_stopped(self, node: str, job_id: str, attempt: int) -> None:
        """The worker's final update of an attempt (sent once its process has ended): if this
        part was told to stop, its GPUs are free and, once every part of the attempt stopped,
        the job's next attempt may be placed, now (a pass is asked for), not only after the
        worker's next heartbeat and the tick."""
        if self.stopping.stopped(node, job_id, attempt):
            self.wakeup.poke()

    def _hide_stopping_gpus(self, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        """The nodes with the GPUs of still-stopping parts marked unhealthy for this pass."""
        held = self.stopping.gpus()
        return hide_gpus(nodes, held) if held else nodes

    def _hold_stopping(self, plan: Plan) -> None:
        """Hold the next attempt of a job until every part of its last one stopped (never two
        attempts at once), and keep its reason meanwhile: why that attempt ended."""
        self.stopping.prune(self.registry)
        stopping = self.stopping.jobs()
        if not stopping:
            return
        for a in plan.assigns:
            if a.job_id in stopping:
                log.info("assignment of %s held: its last attempt is still stopping", a.job_id)
        plan.assigns = [a for a in plan.assigns if a.job_id not in stopping]
        plan.waits = [w for w in plan.waits if w.job_id not in stopping]

    def _dispatch(self, changes: list[Change], assigns: dict[str, Assign]) -> None:
        for c in changes:
            before, after = c.before.job, c.after.job
            if before.state is JobState.PENDING and after.state is JobState.ASSIGNED:
                self.dispatch.assign(after)
            elif before.state.active and after.state is JobState.PENDING:
                _log_requeue(before, after.reason)
                self.dispatch.kill(before.node, before.id, before.attempt, after.reason)
                if not gang.is_gang(before):  # (a gang's parts: the gang book, as it stops them)
                    self.stopping.add_attempt(before, self.registry)
        dropped = set(assigns) - {c.after.job.id for c in changes if c.after.job.state is JobState.ASSIGNED}
        for job_id in dropped:
            log.info("assignment of %s skipped: the job changed meanwhile", job_id)


def _log_requeue(job: Job, why: str) -> None:
    """One line per preemption, drain and reclaim: the attempt stopped and why."""
    where = ",".join(job.nodes) or job.node
    log.info("job %s attempt %d on %s stopped and requeued: %s", job.id, job.attempt, where, why)


def _only_cordoned(e: NodeEntry) -> bool:
    """A node that would take work but for an admin's cordon or drain (live, its stream open,
    not fenced): the one case where "every ready node is cordoned" is the reason."""
    return e.admin is not None and e.state is NodeState.READY and e.connected and not e.fenced
