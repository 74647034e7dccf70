"""The discrete-event loop: arrivals, completions and scheduling rounds, deterministic.

Each round does what the live master's scheduler tick does: build a :class:`ClusterSnapshot`
(every node; the pending and active jobs), call ``policy.decide(snapshot, now)`` and apply the
actions: ``Assign`` starts the next attempt, ``Preempt`` stops a job and re-queues it with its
progress (less :attr:`SimConfig.restart_cost_s` of work) and asks for a follow-up round
:attr:`SimConfig.poke_s` later, ``Wait`` changes nothing. Actions pass the master's own checks
(:func:`~horus_core.policies.checks.check_actions`): what the master would drop is dropped here
too. A preempted job that restarts on other GPUs counts as a migration. Elastic jobs
(:mod:`horus_core.sim.elastic`, ``SimConfig.elastic``) run at the speed of the GPU count they
are assigned, and a restart with another count counts as a resize; a policy that hears progress
reports (:func:`~horus_core.policies.base.progress_of`) hears every running job's step and loss
before each round; in a cold start (:mod:`horus_core.sim.cold`) the policies' model hears what
running jobs show. Between rounds jobs
progress at the rates :class:`~horus_core.sim.world.World` computes.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from itertools import count

import numpy as np

from horus_core.inorder import InOrder
from horus_core.model import Assign, Job, JobChanges, Node, Preempt
from horus_core.policies.base import HearsProgress, Policy, Reports, progress_of
from horus_core.policies.checks import check_actions
from horus_core.sim.cold import ColdLearner
from horus_core.sim.config import SimConfig, SimResult, Timeline
from horus_core.sim.elastic import LossReporter, give_curves, make_elastic
from horus_core.sim.lookup import SimLookup
from horus_core.sim.prepare import prepare_jobs
from horus_core.sim.rates import RateCache, RateModel, SimulationError
from horus_core.sim.scaling import crossing
from horus_core.sim.split import I64, split_snapshot
from horus_core.sim.state import ACTIVE, DONE, PENDING, SimJob, record_of
from horus_core.sim.traces import TraceJob
from horus_core.sim.world import World

Progress = Callable[[int, int], None]  # (jobs finished, jobs in the trace)
# Periodic rounds stop after this many in a row with no GPU in use and no arrival to come (a
# queue nothing can ever start, e.g. a gang larger than any node that a policy will not shrink).
STALL_ROUNDS = 10
_SOURCES = count()  # (each simulator names the changes it hands out: policies tell runs apart)
MAX_DROP_NOTES = 5


class Simulator:
    def __init__(
        self,
        trace: Sequence[TraceJob],
        nodes: Sequence[Node],
        policy: Policy,
        model: RateModel,
        config: SimConfig | None = None,
        progress: Progress | None = None,
        learner: ColdLearner | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.learner = learner  # a cold start: tells the policies' model what running jobs show
        self.policy = policy
        self.rates = RateCache(model)
        prepared = prepare_jobs(trace, nodes, self.rates, self.config.min_speed)
        self.jobs = prepared.jobs
        self.cols = prepared.cols
        self.warnings = tuple(prepared.warnings)
        self.world = World(nodes, self.rates, self.config.slow_threshold)
        self.by_id = {j.id: j for j in self.jobs}
        self.live: dict[str, Job] = {}  # what policies see: pending and active jobs, arrival order
        self.running, self.waiting = InOrder(), InOrder()  # the active and the pending jobs (live's order)
        self.lookup = SimLookup(self.live, self.world)
        self.heap: list[tuple[float, int, int]] = []  # (time, job idx, job version) completions
        self.progress = progress
        self.now = self.jobs[0].arrival if self.jobs else 0.0
        self.next_arrival = 0
        self.pending = 0
        self.finished = 0
        self.last_round = -math.inf
        self.deferred: float | None = None
        self.idle_ticks = 0
        self.busy_gpu_s = self.useful_gpu_s = 0.0
        self.decide_s: list[float] = []
        self.dropped: list[str] = []
        self.timeline = Timeline()
        self.counters = dict.fromkeys(
            ("rounds", "events", "preemptions", "migrations", "evictions", "waits", "dropped"), 0
        )
        self.counters.update(
            capped_cluster=prepared.capped_cluster,
            capped_measured=prepared.capped_measured,
            extrapolated=prepared.extrapolated,
        )
        self.hearer = progress_of(policy)
        self.losses = LossReporter(self.config.elastic_seed)
        self.counters["resizes"] = 0
        self.counters["spread_starts"] = 0
        if self.config.elastic > 0:
            self.counters["elastic"] = self._make_elastic(nodes)
        if self.config.loss_curves or self.config.hide_total_steps:
            cfg = self.config
            give_curves(self.jobs, cfg.elastic_seed, cfg.loss_curves, cfg.hide_total_steps)
        self.changed: dict[str, Job | None] = {}  # live jobs changed since the last round's snapshot
        self.source, self.epoch = f"sim-{next(_SOURCES)}", 0  # (names the changes handed out)
        self.curves = any(j.curve is not None for j in self.jobs)  # whether any job reports a loss

    def _make_elastic(self, nodes: Sequence[Node]) -> int:
        cfg = self.config
        types = sorted({g.gpu_type for n in nodes for g in n.gpus})
        largest = max(len(n.gpus) for n in nodes)
        args = (cfg.elastic, cfg.elastic_seed, cfg.elastic_known_steps)
        return make_elastic(self.jobs, self.rates, types, largest, *args)

    # ------------------------------------------------------------------------------ main loop

    def run(self) -> SimResult:
        started = time.perf_counter()
        cfg = self.config
        while (t := self._next_time()) is not None:
            if cfg.max_time_s is not None and t > cfg.max_time_s:
                self._advance(cfg.max_time_s)
                break
            self._advance(t)
            if self.learner is not None:  # (before the jobs due now end: they ran until now)
                self.learner.observe(self.world, t)
            event = self._take_events(t)
            if self._round_due(t, event):
                self._round(t)
            self._refresh(t)
            self._count_idle()
            self.counters["events"] += 1
            if cfg.timeline:
                self.timeline.add(t, self.world.busy, self.world.useful, self.pending)
            if self.progress is not None and self.counters["events"] % 512 == 0:
                self.progress(self.finished, len(self.jobs))
        for job in self.jobs:
            if job.status == ACTIVE:
                job.settle(self.now, cfg.slow_threshold)
        return self._result(time.perf_counter() - started)

    def _next_time(self) -> float | None:
        heap = self.heap
        while heap and self.jobs[heap[0][1]].version != heap[0][2]:
            heapq.heappop(heap)
        candidates = []
        if heap:
            candidates.append(heap[0][0])
        if self.next_arrival < len(self.jobs):
            candidates.append(self.jobs[self.next_arrival].arrival)
        if self.deferred is not None:
            candidates.append(self.deferred)
        tick = self._next_tick()
        if tick is not None and (candidates or self.idle_ticks < STALL_ROUNDS):
            candidates.append(tick)
        return min(candidates) if candidates else None

    def _next_tick(self) -> float | None:
        period = self.config.round_s
        if period is None or self.pending == 0:
            return None
        return (math.floor(self.now / period) + 1) * period

    def _count_idle(self) -> None:
        nothing_to_come = self.next_arrival == len(self.jobs) and self.deferred is None
        self.idle_ticks = self.idle_ticks + 1 if nothing_to_come and self.world.busy == 0 else 0

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.busy_gpu_s += self.world.busy * dt
            self.useful_gpu_s += self.world.useful * dt
        self.now = max(self.now, t)

    def _take_events(self, t: float) -> bool:
        """Complete the jobs due at ``t`` and admit the arrivals; True if anything happened."""
        happened = False
        heap = self.heap
        while heap and heap[0][0] <= t:
            _, idx, version = heapq.heappop(heap)
            job = self.jobs[idx]
            if job.version == version:
                self._complete(job, t)
                happened = True
        while self.next_arrival < len(self.jobs) and self.jobs[self.next_arrival].arrival <= t:
            self._arrive(self.jobs[self.next_arrival], t)
            self.next_arrival += 1
            happened = True
        return happened

    def _round_due(self, t: float, event: bool) -> bool:
        cfg = self.config
        due = cfg.round_s is not None and self.pending > 0 and t % cfg.round_s == 0.0
        if self.deferred is not None and t >= self.deferred:
            self.deferred, due = None, True
        if event and cfg.event_rounds:
            if t - self.last_round >= cfg.min_gap_s:
                due = True
            elif self.deferred is None:
                self.deferred = self.last_round + cfg.min_gap_s
        return due and (cfg.idle_rounds or self.pending > 0)

    # --------------------------------------------------------------------------- transitions

    def _arrive(self, job: SimJob, t: float) -> None:
        job.status = PENDING
        job.last = t
        self._set_view(job, job.pending_view(t, "queued"), self.waiting)
        self.pending += 1

    def _complete(self, job: SimJob, t: float) -> None:
        self.world.remove(job, t)
        self.running.drop(job.idx)
        job.done_steps = job.steps
        job.status = DONE
        job.finish = t
        del self.live[job.id]
        self.changed[job.id] = job.view = None
        self.finished += 1

    def _round(self, t: float) -> None:
        if self.hearer is not None:
            self._report_progress(self.hearer, t)
        snapshot = split_snapshot(self.world.nodes, self.live, self.waiting, self.running, self._handout)
        started = time.perf_counter()
        actions = self.policy.decide(snapshot, t)
        self.decide_s.append(time.perf_counter() - started)
        self.counters["rounds"] += 1
        self.last_round = t
        plan = check_actions(snapshot, list(actions), self.lookup)
        for action, problem in plan.dropped:
            self._drop(action, problem)
        for preempt in plan.preempts:
            self._preempt(self.by_id[preempt.job_id], preempt, t)
        for assign in plan.assigns:
            self._assign(self.by_id[assign.job_id], assign, self.world.resolve(assign.node, assign.gpus), t)
        self.counters["waits"] += plan.n_waits
        if plan.preempts:
            # The master re-plans when a stopped attempt reports its end (its tick is 1 s).
            follow = t + self.config.poke_s
            self.deferred = follow if self.deferred is None else min(self.deferred, follow)

    def _handout(self, numbers: I64, versions: I64) -> JobChanges:
        """The live jobs changed since the last round's snapshot, as the master's live index hands
        them out (policies' ledgers follow them instead of walking every live job), with the
        snapshot's pending then active jobs' numbers (indices) and versions."""
        base, self.epoch = self.epoch, self.epoch + 1
        changed, self.changed = self.changed, {}
        return JobChanges(self.source, base, self.epoch, changed, numbers, versions)

    def _report_progress(self, hearer: HearsProgress, t: float) -> None:
        """What the live master hears from running jobs: their step and (elastic) loss, every
        active job settled to ``t``, in the snapshot's order (arrival: the jobs' indices)."""
        numbers = self.running.numbers()
        steps = self.cols.settle_many(numbers.astype(np.intp, copy=False), t, self.config.slow_threshold)
        ids = self.running.ids()
        losses = None
        if self.curves:  # (the jobs themselves only where a loss is reported)
            losses = list(map(self.losses.loss, map(self.jobs.__getitem__, numbers.tolist())))
        hearer.hear(Reports(ids, steps, losses, np.full(len(ids), t), (self.source, numbers)))

    def _drop(self, action: object, problem: str) -> None:
        message = f"policy {self.policy.name!r} at t={self.now:.3f}: {action!r} dropped: {problem}"
        if self.config.strict:
            raise SimulationError(message)
        self.counters["dropped"] += 1
        if len(self.dropped) < MAX_DROP_NOTES:
            self.dropped.append(message)

    def _assign(self, job: SimJob, action: Assign, gpus: tuple[int, ...], t: float) -> None:
        if job.resume_from and job.resume_from != gpus:
            self.counters["migrations"] += 1
        if job.solo_at is not None:
            self.counters["resizes"] += bool(job.resume_from) and len(job.resume_from) != len(gpus)
            job.solo = job.solo_at[len(gpus)]
        job.status, job.gpus, job.node, job.resume_from = ACTIVE, gpus, action.node, ()
        nodes, racks = self.world.span(gpus) if len(gpus) > 1 else (1, 1)
        job.cross = crossing(nodes, racks, self.config.cross_node_factor, self.config.cross_rack_factor)
        job.nodes = max(job.nodes, nodes)
        self.counters["spread_starts"] += nodes > 1
        job.attempt += 1
        job.last = job.started_at = t
        if job.first_start is None:
            job.first_start = t
        self.world.place(job)
        self.waiting.drop(job.idx)
        self._set_view(job, job.running_view(t, tuple(action.gpus), action.predicted_slowdown), self.running)
        self.pending -= 1

    def _preempt(self, job: SimJob, action: Preempt, t: float) -> None:
        lost = self.config.restart_cost_s * job.solo[self.world.gpu_type[job.gpus[0]]]
        self.world.remove(job, t)
        job.done_steps = max(0.0, job.done_steps - lost)
        job.preemptions += 1
        job.resume_from = job.gpus
        self.counters["preemptions"] += 1
        if self.hearer is not None:
            self.hearer.hear(Reports.of([(job.id, job.done_steps, None, t)]))
        self._requeue(job, t, action.reason)

    def _requeue(self, job: SimJob, t: float, reason: str) -> None:
        self.running.drop(job.idx)
        job.status = PENDING
        self._set_view(job, job.pending_view(t, reason), self.waiting)
        self.pending += 1

    def _set_view(self, job: SimJob, view: Job, joins: InOrder) -> None:
        self.changed[job.id] = self.live[job.id] = job.view = view
        joins.put(job.idx, view)

    def _refresh(self, t: float) -> None:
        changed, evicted = self.world.refresh(t)
        for job in evicted:
            if self.learner is not None:
                self.learner.evicted(job, self.world)
            job.evictions += 1
            self.counters["evictions"] += 1
            self._requeue(job, t, "did not fit next to its co-runners (evicted)")
        for job in changed:
            if job.rate > 0:
                remaining = max(job.steps - job.done_steps, 0.0)
                heapq.heappush(self.heap, (t + remaining / job.rate, job.idx, job.version))

    def _end_warnings(self) -> tuple[str, ...]:
        notes = []
        if self.counters["dropped"]:
            notes.append(
                f"{self.counters['dropped']} action(s) dropped as the master would; first: {self.dropped[0]}"
            )
        left = len(self.jobs) - self.finished
        if left:
            why = (
                "the clock stopped"
                if self.next_arrival < len(self.jobs) or self.heap
                else "the queue stalled"
            )
            notes.append(f"{left} job(s) did not finish ({why} at t={self.now:.0f} s)")
        return tuple(notes)

    def _result(self, wall_s: float) -> SimResult:
        start = self.jobs[0].arrival if self.jobs else 0.0
        return SimResult(
            policy=self.policy.name,
            gpus=self.world.size,
            records=tuple(record_of(j) for j in self.jobs),
            start=start,
            end=self.now,
            busy_gpu_s=self.busy_gpu_s,
            useful_gpu_s=self.useful_gpu_s,
            decide_s=tuple(self.decide_s),
            counters=dict(self.counters),
            timeline=self.timeline,
            warnings=self.warnings + self._end_warnings(),
            wall_s=wall_s,
        )
