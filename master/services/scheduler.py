"""The scheduling loop: the live index's jobs -> ``policy.decide`` (off the loop) -> apply -> dispatch.

A pass runs when something changed (a submission, a finished attempt, a node coming or going:
:meth:`Core.poke`, coalesced) and every ``tick_s``; after a slow pass the loop first rests as long
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
from horus_core.model import Assign, ClusterSnapshot, JobState, NodeState
from horus_core.policies import Policy
from horus_core.policies.checks import Plan, check_actions
from master.services import transitions as tr
from master.services.core import Core
from master.services.floor import FloorEnforcer
from master.store.jobs import Change, Transition
from master.store.live import IndexLookup

log = logging.getLogger(__name__)

NO_NODES = "no ready nodes"
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
    def __init__(self, core: Core, policy: Policy, liveness: Callable[[], Awaitable[None]]) -> None:
        self.core = core
        self.policy = policy
        self._liveness = liveness
        self._last_idle_note = float("-inf")
        self._pass_lock = asyncio.Lock()  # one pass at a time: a pass's snapshot stays valid
        # job id -> (node, attempt, heartbeats then): a preempted attempt not yet seen stopped
        self._stopping: dict[str, tuple[str, int, int]] = {}
        self.passes = 0
        # Called after each pass with its duration (s) and result (the metrics); must not block.
        self.observers: list[Callable[[float, PassResult], None]] = []
        self._rest_s = 0.0
        self.floor = FloorEnforcer(core)  # speed floors: co-runners to move (issue 10)

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
            self._rest_s = rest_after(time.perf_counter() - started, self.core.config.tick_s)

    async def _wait(self) -> None:
        if self._rest_s > 0:  # (real time: what the last pass really cost; pokes meanwhile coalesce)
            await asyncio.sleep(self._rest_s)
        ev = self.core.schedule_needed
        if not ev.is_set():
            poked = asyncio.ensure_future(ev.wait())
            tick = asyncio.ensure_future(self.core.clock.sleep(self.core.config.tick_s))
            try:
                await asyncio.wait((poked, tick), return_when=asyncio.FIRST_COMPLETED)
            finally:
                poked.cancel()
                tick.cancel()
        ev.clear()

    async def run_once(self) -> PassResult:
        await self.core.learner.checkpoint()  # (every minute: stores what running attempts measured)
        async with self._pass_lock:
            self.core.learner.apply_observations()  # no policy is running now
            started = time.perf_counter()
            result = await self._pass()
            for fn in self.observers:
                fn(time.perf_counter() - started, result)
            return result

    async def _pass(self) -> PassResult:
        core = self.core
        self.passes += 1
        nodes = core.registry.schedulable()
        now = core.clock.now()
        if not nodes:
            if now - self._last_idle_note >= core.config.tick_s:
                self._last_idle_note = now
                await core.set_pending_reason(NO_NODES)
            return PassResult(skipped=True)
        t0 = time.perf_counter()
        snapshot = ClusterSnapshot(nodes=nodes, jobs=core.live.jobs())
        t1 = time.perf_counter()
        actions = await asyncio.to_thread(self.policy.decide, snapshot, now)
        actions = [*actions, *await self.floor.preempts()]
        t2 = time.perf_counter()
        plan = check_actions(snapshot, list(actions), IndexLookup(core.live, nodes))
        plan.assigns = self._not_stopping(plan.assigns)
        todo = self._transitions(plan, core.clock.now(), core.registry.gpu_nodes())
        async with core.lock:
            changes = await core.apply(todo)
            self._dispatch(changes, {a.job_id: a for a in plan.assigns})
        for c in changes:
            if c.before.job.state.active and not c.after.job.state.active:
                await core.learner.attempt_ended(c.before.job, c.before.job.attempt)
        done = PassResult(len(plan.assigns), len(plan.preempts), len(plan.waits), len(plan.dropped))
        done.read_s, done.decide_s, done.commit_s = t1 - t0, t2 - t1, time.perf_counter() - t2
        return done

    @staticmethod
    def _transitions(plan: Plan, now: float, gpu_nodes: Mapping[str, str]) -> list[tuple[str, Transition]]:
        """The plan as transitions (``plan.waits`` holds only the Waits with a new reason); an
        assign whose GPUs span nodes starts a gang attempt on those nodes, in rank order."""
        todo: list[tuple[str, Transition]] = []
        for a in plan.assigns:
            nodes = gang_nodes(a, gpu_nodes)
            if nodes is None:
                log.warning("policy action dropped: %s (GPUs not in rank order from its node)", a)
                continue
            todo.append((a.job_id, tr.assign(a.node, a.gpus, a.predicted_slowdown, now, nodes)))
        todo += [(p.job_id, tr.preempt(p.reason, now)) for p in plan.preempts]
        todo += [(w.job_id, tr.set_wait_reason(w.reason, now)) for w in plan.waits]
        return todo

    def _not_stopping(self, assigns: list[Assign]) -> list[Assign]:
        """Hold the next attempt of a preempted job until its worker no longer reports the old one
        running (a heartbeat after the Kill without it, or the node LOST, whose lease has run out):
        never two attempts at once."""
        for job_id, (node, attempt, seen) in list(self._stopping.items()):
            entry = self.core.registry.get(node)
            if (
                entry is None
                or entry.state is NodeState.LOST
                or (entry.heartbeats > seen and (job_id, attempt) not in entry.running)
            ):
                del self._stopping[job_id]
        gangs, registry = self.core.gangs, self.core.registry
        held = [a for a in assigns if a.job_id in self._stopping or gangs.held(a.job_id, registry)]
        for a in held:
            log.info("assignment of %s held: its preempted attempt is still stopping", a.job_id)
        return [a for a in assigns if a not in held]

    def _dispatch(self, changes: list[Change], assigns: dict[str, Assign]) -> None:
        for c in changes:
            before, after = c.before.job, c.after.job
            if before.state is JobState.PENDING and after.state is JobState.ASSIGNED:
                self.core.send_assignment(after)
            elif before.state.active and after.state is JobState.PENDING:
                self.core.send_kill(before.node, before.id, before.attempt, after.reason)
                entry = self.core.registry.get(before.node)
                self._stopping[before.id] = (before.node, before.attempt, entry.heartbeats if entry else 0)
        dropped = set(assigns) - {c.after.job.id for c in changes if c.after.job.state is JobState.ASSIGNED}
        for job_id in dropped:
            log.info("assignment of %s skipped: the job changed meanwhile", job_id)
