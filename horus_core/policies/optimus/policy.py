"""The ``optimus`` policy: elastic GPU counts from each job's fitted convergence and speed.

Every ``replan_s`` seconds (default 600) it re-plans all jobs (:mod:`.allocate`). A running job
whose count changes is resized: ``Preempt`` now, ``Assign`` with the new count once its GPUs are
free; it is stopped to grow only to a count one node will have free (:mod:`.place`). Between
re-plans only pending jobs are given free GPUs. Jobs go to the fewest nodes; wide jobs are placed
apart (:mod:`horus_core.policies._wide`); a job that finds no free GPUs may share with a resident
it pairs well with.

Remaining time on ``w`` GPUs = steps left / rate(w), plus ``restart_s`` where the count would
change. Steps left: ``total_steps - step`` when given, else the fitted curve's convergence step
minus the step (:mod:`.fit`), but at least :data:`PAST_END_FRACTION` of the steps done; with no
fit, as many as done, at least :data:`UNKNOWN_STEPS`. rate(w): the speed model fitted to the
job type's solo throughputs at 1/2/4/8 GPUs on the cluster's most common type (ideal scaling
when never measured). A non-elastic spec is the range ``gpus..gpus``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, NodeState, Preempt, Wait
from horus_core.policies._wide import split
from horus_core.policies.base import Reports, arrival_order, residents
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.optimus.allocate import Demand, allocate
from horus_core.policies.optimus.fit import LossCurve, SpeedModel, fit_loss_curve, fit_speed
from horus_core.policies.optimus.history import ProgressBook
from horus_core.policies.optimus.place import Placed, feasible_resizes, place_exclusive, place_shared
from horus_core.policies.staged import Stages
from horus_core.policies.state import Book
from horus_core.policies.views import View
from horus_core.validation import MAX_GPUS_PER_JOB

REPLAN_S = 600.0
RESTART_S = 30.0
UNKNOWN_STEPS = 1000.0
MEASURED_COUNTS = (1, 2, 4, 8)
SHARE_LOOKAHEAD = 8  # waiting jobs tried for a shared placement per round
PAST_END_FRACTION = 0.1  # a fitted job has at least this fraction of its steps done left
REFIT_POINTS = 4  # refit a loss curve once its history has this many new points (or 1/8 more)


@dataclass
class OptimusPolicy(Stages):
    model: InterferenceModel
    name: str = "optimus"
    replan_s: float = REPLAN_S
    restart_s: float = RESTART_S
    share: bool = True
    history: ProgressBook = field(default_factory=ProgressBook)
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)
    book: Book = field(default_factory=Book, init=False, repr=False, compare=False)
    last_plan: float = -math.inf
    targets: dict[str, int] = field(default_factory=dict)
    _fits: dict[str, tuple[int, LossCurve | None]] = field(default_factory=dict, repr=False)
    _rates: dict[tuple[str, str], tuple[float, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not (self.replan_s >= 0 and self.restart_s >= 0):
            raise ValueError("replan_s and restart_s must not be negative")

    def _forget(self, keep: set[str]) -> None:
        self.history.forget(keep)
        for job_id in [k for k in self._fits if k not in keep]:
            del self._fits[job_id]

    @property
    def progress(self) -> OptimusPolicy:
        """It hears progress reports itself (:meth:`hear`)."""
        return self

    def hear(self, reports: Reports) -> None:
        """Each report's step and loss into its job's history, in order."""
        losses = reports.losses
        for k, (job_id, step) in enumerate(zip(reports.ids, reports.steps.tolist(), strict=True)):
            self.history.record(job_id, step, None if losses is None else losses[k])

    def serve(self, view: View) -> list[Action]:
        snapshot, now = view.snapshot, view.state.now
        live = {j.id for j in view.state.snapshot.jobs}  # (the pass's: what a re-plan keeps)
        wide, rest = split(snapshot)  # gangs larger than a node: spread, at their asked count
        return [*wide, *self._plan(rest, now, live)] if wide else self._plan(snapshot, now, live)

    def _plan(self, snapshot: ClusterSnapshot, now: float, live: set[str]) -> list[Action]:
        replan = now - self.last_plan >= self.replan_s
        pending = snapshot.pending()
        if not pending and not replan:
            return []
        if replan:
            self.last_plan = now
            self._forget(live)
        nodes = [n for n in snapshot.nodes if n.state is NodeState.READY]
        gpus = {n.name: sorted((g for g in n.gpus if g.healthy), key=lambda g: g.index) for n in nodes}
        if not any(gpus.values()):
            return [Wait(j.id, "optimus: no ready GPU", rc.NO_READY_NODES) for j in pending]
        gpu_type = Counter(g.gpu_type for gs in gpus.values() for g in gs).most_common(1)[0][0]
        largest = max(len(g) for g in gpus.values())
        active, queue = snapshot.active(), arrival_order(pending)
        demands = [self._demand(j, gpu_type, largest, replan) for j in (*active, *queue)]
        capacity = sum(map(len, gpus.values())) + _overlap(active)
        alloc = allocate([d for d in demands if d is not None], capacity)
        return self._actions(active, queue, gpus, alloc, replan)

    # ------------------------------------------------------------------------ estimates

    def _demand(self, job: Job, gpu_type: str, largest: int, replan: bool) -> Demand | None:
        lo, hi = _range(job, largest)
        if lo > hi:
            return None
        current = len(job.gpus) if job.state.active else 0
        if current and not replan:
            return Demand(job.id, lo, hi, (math.inf,) * (hi + 1), fixed=current)
        target = self.targets.get(job.id) if not current and not replan else None
        if target is not None:  # stopped to be resized (or planned at the last re-plan)
            lo = hi = min(max(target, lo), hi)
        steps = self.steps_left(job)
        rates = self._rates_of(job.spec.job_type, gpu_type)
        times = [math.inf] + [steps / r if r > 0 else math.inf for r in rates[1 : hi + 1]]
        if current:
            times = [t if w == current else t + self.restart_s for w, t in enumerate(times)]
        return Demand(job.id, lo, hi, tuple(times), keep=bool(current) or target is not None)

    def steps_left(self, job: Job) -> float:
        """Estimated steps to the target: ``total_steps`` or the fitted convergence (module doc)."""
        history = self.history.get(job.id)
        done = history.last_step if history is not None else 0.0
        if job.spec.total_steps > 0:
            return max(job.spec.total_steps - done, 1.0)
        curve = self._curve(job.id)
        end = curve.converge_step() if curve is not None else math.inf
        if math.isfinite(end):
            return max(end - done, PAST_END_FRACTION * done, 1.0)
        return max(done, UNKNOWN_STEPS)

    def _curve(self, job_id: str) -> LossCurve | None:
        history = self.history.get(job_id)
        if history is None:
            return None
        cached = self._fits.get(job_id)
        if cached is None or history.version - cached[0] >= max(REFIT_POINTS, cached[0] // 8):
            cached = (history.version, fit_loss_curve(history.steps, history.losses))
            self._fits[job_id] = cached
        return cached[1]

    def _rates_of(self, job_type: str, gpu_type: str) -> tuple[float, ...]:
        """Steps/s of the fitted speed model on 0..MAX_GPUS_PER_JOB GPUs (memoised per type)."""
        key = (job_type, gpu_type)
        rates = self._rates.get(key)
        if rates is None:
            counts = [w for w in MEASURED_COUNTS if self.model.solo_throughput(job_type, w, gpu_type)]
            measured = [self.model.solo_throughput(job_type, w, gpu_type) or 0.0 for w in counts]
            model = fit_speed(counts, measured) or SpeedModel(1.0, 0.0, 0.0)
            rates = self._rates[key] = tuple(model.rate(w) for w in range(MAX_GPUS_PER_JOB + 1))
        return rates

    # -------------------------------------------------------------------------- actions

    def _actions(
        self,
        active: Sequence[Job],
        pending: Sequence[Job],
        gpus: dict[str, list[Gpu]],
        alloc: dict[str, int],
        replan: bool,
    ) -> list[Action]:
        """Resizes (on a re-plan), then Assigns for the pending jobs that fit, Waits for the rest."""
        free, alone = _free_gpus(active, gpus)
        wants = [(j, alloc[j.id], _minimum(j)) for j in pending if j.id in alloc]
        wants.sort(key=lambda w: -w[1])
        placed, _ = place_exclusive(wants, free)
        done = {p.job.id for p in placed}
        actions: list[Action] = []
        if replan:
            self.targets = dict(alloc)
            actions += self._resizes(active, alloc, {n: len(g) for n, g in free.items()})
            stopping = {a.job_id for a in actions}
            alone = {n: [(g, r) for g, r in gs if r.id not in stopping] for n, gs in alone.items()}
        waiting = [j for j in pending if j.id not in done]
        if self.share and waiting:
            placed += self._share(waiting, alone)
            done = {p.job.id for p in placed}
        for p in placed:
            self.targets.pop(p.job.id, None)
            actions.append(Assign(p.job.id, p.node, tuple(g.uuid for g in p.gpus)))
        largest = max(map(len, gpus.values()))
        why = [(j, _wait_reason(j, alloc, largest, self.replan_s)) for j in pending if j.id not in done]
        actions += [Wait(j.id, reason, _wait_code(j, largest)) for j, reason in why]
        return actions

    def _resizes(self, active: Sequence[Job], alloc: dict[str, int], free: dict[str, int]) -> list[Action]:
        """Preempts of the running jobs whose planned count differs and fits (see module doc)."""
        running = {j.id: (j.node, len(j.gpus)) for j in active}
        wants = {k: alloc[k] for k in running if alloc.get(k, running[k][1]) != running[k][1]}
        out: list[Action] = []
        for job_id, want in feasible_resizes(running, wants, free).items():
            self.targets[job_id] = want
            out.append(Preempt(job_id, f"optimus: resize {running[job_id][1]} -> {want} GPUs"))
        return out

    def _share(self, waiting: Sequence[Job], alone: dict[str, list[tuple[Gpu, Job]]]) -> list[Placed]:
        """Shared placements for the first waiting jobs, at their minimum (see :mod:`.place`)."""
        sig, pairs = self.model.signature, dict[tuple[str, str, str], tuple[float, float]]()

        def pair(resident: Job, job: Job, gpu: Gpu) -> tuple[float, float]:
            key = (sig(resident.spec), sig(job.spec), gpu.gpu_type)
            got = pairs.get(key)
            if got is None:
                theirs, mine = self.model.co_speeds(key[:2], key[2])
                got = pairs[key] = (theirs, mine)
            return got

        out = []
        for job in waiting[:SHARE_LOOKAHEAD]:
            if job.spec.exclusive:
                continue
            spot = place_shared(job, _minimum(job), alone, pair)
            if spot is not None:
                out.append(spot)
        return out


def _minimum(job: Job) -> int:
    return job.spec.gpu_range()[0]


def _range(job: Job, largest: int) -> tuple[int, int]:
    """The job's GPU range with the maximum capped to the largest node."""
    lo, hi = job.spec.gpu_range()
    return lo, min(hi, largest)


def _overlap(active: Sequence[Job]) -> int:
    """GPUs held by more than one job count once per extra holder (shared GPUs)."""
    held = [u for j in active for u in j.gpus]
    return len(held) - len(set(held))


def _free_gpus(
    active: Sequence[Job], gpus: dict[str, list[Gpu]]
) -> tuple[dict[str, list[Gpu]], dict[str, list[tuple[Gpu, Job]]]]:
    """GPUs with no resident, and GPUs with exactly one resident that may share."""
    holders = residents(active)
    free: dict[str, list[Gpu]] = {}
    alone: dict[str, list[tuple[Gpu, Job]]] = {}
    for node, gs in gpus.items():
        for g in gs:
            held = holders.get(g.uuid, [])
            if not held:
                free.setdefault(node, []).append(g)
            elif len(held) == 1 and not held[0].spec.exclusive:
                alone.setdefault(node, []).append((g, held[0]))
    return free, alone


def _wait_reason(job: Job, alloc: dict[str, int], largest: int, replan_s: float) -> str:
    lo = _minimum(job)
    if lo > largest:
        return f"optimus: needs {lo} GPUs on one node; the largest ready node has {largest}"
    if job.id in alloc:
        return f"optimus: waiting for {alloc[job.id]} GPUs on one node"
    every = f"{replan_s / 60:g} min"
    return f"optimus: every GPU is allocated; re-planned every {every}, freed GPUs go to waiting jobs"


def _wait_code(job: Job, largest: int) -> str:
    return rc.GANG_TOO_LARGE if _minimum(job) > largest else rc.RESOURCES


def make(model: InterferenceModel | None) -> OptimusPolicy:
    return OptimusPolicy(model or default_model())
