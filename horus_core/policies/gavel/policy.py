"""``GavelPolicy``: one LP allocation plus the round mechanism behind ``decide()``.

Every call brings the time ledger up to date; the allocation (the LP) is recomputed when the
set of jobs or GPUs changed (and at each round for the objectives that read remaining work).
At a round boundary (``floor(now / round_s)`` changes) the whole cluster is re-planned by
priority; between boundaries the plan holds and only idle GPUs are handed out, by the same
priorities, to jobs without a slot (arrivals, GPUs freed by completions). With
``work_conserving=False`` they are not: as in Gavel's own mechanism, an arrival waits for the
next round and a GPU freed mid-round stays idle until then.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core import reasoncodes as rc
from horus_core.errors import InvalidArgument
from horus_core.interference import InterferenceModel
from horus_core.model import Action, ClusterSnapshot, Job, JobState, NodeState, Wait, gpu_type_of
from horus_core.policies.gavel.classes import Problem, build_problem
from horus_core.policies.gavel.lp import Infeasible, Pairs, Solution
from horus_core.policies.gavel.objectives import Members, solve_ftf, solve_makespan, solve_max_min
from horus_core.policies.gavel.pairs import choose_pairs
from horus_core.policies.gavel.placement import actions_for
from horus_core.policies.gavel.rounds import Ledger, Slot, choose
from horus_core.policies.gavel.shares import JobShare, job_shares
from horus_core.policies.gputypes import allowed_types, cluster_types

log = logging.getLogger(__name__)

ROUND_S = 360.0
UNKNOWN_WORK_S = 3600.0  # a job without total_steps is assumed to need an hour at its best speed


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    objective: str  # "las" | "ftf" | "makespan"
    agnostic: bool = False
    packed: bool = False


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("gavel-las", "las", agnostic=True),
        Variant("gavel-las-perf", "las"),
        Variant("gavel-las-packed", "las", packed=True),
        Variant("gavel-ftf-perf", "ftf"),
        Variant("gavel-makespan-perf", "makespan"),
    )
}


class GavelPolicy:
    def __init__(
        self,
        variant: Variant,
        model: InterferenceModel,
        round_s: float = ROUND_S,
        work_conserving: bool = True,
        group: bool = True,  # False: one LP row per job (slower, same optimum: a reference)
        second_stage: bool = True,  # False: max-min's stage 1 only, as Gavel solves it
    ) -> None:
        if not (math.isfinite(round_s) and round_s > 0):
            raise InvalidArgument("round_s", f"must be a positive number of seconds, got {round_s}")
        self.name = variant.name
        self.variant = variant
        self.model = model
        self.round_s = round_s
        self.work_conserving = work_conserving
        self.group = group
        self.second_stage = second_stage
        self.ledger = Ledger()
        self.round: int | None = None
        self.plan: dict[str, Slot] = {}
        self.shares: dict[str, JobShare] = {}
        self.problem: Problem | None = None
        self._key: tuple[object, ...] = ()
        self._sigs: dict[str, str] = {}
        self._rho: float | None = None  # finish-time fairness: the last round's ratio

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        snapshot, waits = type_waits(snapshot, self.model)
        return waits + self._decide(snapshot, now)

    def _decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        type_of = _gpu_types(snapshot)
        capacity: dict[str, int] = {}
        for t in type_of.values():
            capacity[t] = capacity.get(t, 0) + 1
        self.ledger.update(snapshot.jobs, type_of, now)
        if not capacity:
            return [Wait(j.id, "no ready GPUs", rc.NO_READY_NODES) for j in snapshot.pending()]
        index = math.floor(now / self.round_s)
        new_round = index != self.round
        self._allocate(snapshot.jobs, capacity, now, new_round)
        speeds = self._speeds()
        if new_round:
            self.round = index
            self.plan = choose(snapshot.jobs, self.shares, self.ledger, capacity, self._sigs, speeds, now)
        elif self.work_conserving:
            self.plan = self._fill(snapshot, type_of, speeds, now)
        return actions_for(snapshot, self.plan, type_of, f"{self.name} round {index}")

    # ------------------------------------------------------------------------ allocation

    def _allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float, new_round: bool) -> None:
        key = (frozenset(j.id for j in jobs), tuple(sorted(capacity.items())))
        reads_work = self.variant.objective != "las"
        if key == self._key and not (new_round and reads_work):
            return
        self._key = key
        for j in jobs:
            if j.id not in self._sigs:
                self._sigs[j.id] = self.model.signature(j.spec)
        self._sigs = {j.id: self._sigs[j.id] for j in jobs}
        sig = self._sigs
        problem = build_problem(
            jobs, capacity, self.model.solo_throughput, lambda j: sig[j.id], self.variant.agnostic, self.group
        )
        self.problem = problem
        if not problem.classes:
            self.shares = {}
            return
        try:
            sol, splits, pairs = self._solve(problem, {j.id: j for j in jobs}, now)
        except (Infeasible, RuntimeError) as exc:
            log.warning("%s: no allocation (%s); jobs go to their fastest free type", self.name, exc)
            self.shares = {}
            return
        self.shares = job_shares(problem, sol, splits, pairs)

    def _solve(
        self, problem: Problem, jobs: Mapping[str, Job], now: float
    ) -> tuple[Solution, list[NDArray[np.float64]], Pairs]:
        if self.variant.objective == "las":
            pairs = Pairs.none(len(problem.types))
            if self.variant.packed:
                pairs = choose_pairs(problem, self._pair_speeds)
            sol, splits = solve_max_min(problem, pairs, self.second_stage)
            return sol, splits, pairs
        members = self._members(problem, jobs, now)
        if self.variant.objective == "ftf":
            sol, splits, self._rho = solve_ftf(problem, members, self._rho)
        else:
            sol, splits = solve_makespan(problem, members)
        return sol, splits, Pairs.none(len(problem.types))

    def _pair_speeds(self, a: str, b: str, gpu_type: str) -> tuple[float, float]:
        sa, sb = self.model.co_speeds((a, b), gpu_type)
        return sa, sb

    def _members(self, problem: Problem, jobs: Mapping[str, Job], now: float) -> Members:
        remaining, age = [], []
        for c, cls in enumerate(problem.classes):
            row = problem.throughput[c]
            rem = [self._remaining(jobs[j], row, problem.types) for j in cls.members]
            remaining.append(np.array(rem, dtype=np.float64))
            age.append(np.array([max(now - jobs[j].submitted_at, 0.0) for j in cls.members]))
        return Members(remaining, age)

    def _remaining(self, job: Job, row: NDArray[np.float64], types: Sequence[str]) -> float:
        """Steps left, estimated from the time the ledger saw it run on each type."""
        total = float(job.spec.total_steps)
        if total <= 0:
            return UNKNOWN_WORK_S * float(row.max())
        done = sum(self.ledger.run_s(job.id, t) * float(x) for t, x in zip(types, row, strict=True))
        return max(total - done, 0.01 * total)

    # ------------------------------------------------------------------------ rounds

    def _speeds(self) -> dict[str, dict[str, float]]:
        problem = self.problem
        if problem is None:
            return {}
        out: dict[str, dict[str, float]] = {}
        for c, cls in enumerate(problem.classes):
            row = dict(zip(problem.types, (float(x) for x in problem.throughput[c]), strict=True))
            for j in cls.members:
                out[j] = row
        return out

    def _fill(
        self,
        snapshot: ClusterSnapshot,
        type_of: Mapping[str, str],
        speeds: Mapping[str, Mapping[str, float]],
        now: float,
    ) -> dict[str, Slot]:
        """Mid-round: the plan's jobs keep their slots; idle GPUs go to jobs without one."""
        present = {j.id: j for j in snapshot.jobs}
        plan = {j: s for j, s in self.plan.items() if j in present}
        busy = {u for j in snapshot.jobs if j.state.active for u in j.gpus}
        room = dict.fromkeys(sorted(set(type_of.values())), 0)
        for uuid, t in type_of.items():
            room[t] += uuid not in busy
        for job_id, slot in plan.items():
            job = present[job_id]
            if job.state is JobState.PENDING and not slot.host:
                room[slot.gpu_type] -= job.spec.gpus
        room = {t: max(n, 0) for t, n in room.items()}
        waiting = [j for j in snapshot.jobs if j.state is JobState.PENDING and j.id not in plan]
        if waiting and any(room.values()):
            plan.update(choose(waiting, self.shares, self.ledger, room, self._sigs, speeds, now))
        for job in snapshot.jobs:  # an active job without a slot (assigned before a new round)
            if job.state is JobState.ASSIGNED and job.id not in plan and job.gpus:
                plan[job.id] = Slot(type_of.get(job.gpus[0], ""))
        return plan


def type_waits(snapshot: ClusterSnapshot, model: InterferenceModel) -> tuple[ClusterSnapshot, list[Action]]:
    """The snapshot without the pending jobs no GPU type here suits (a type the spec does not
    accept, or throughput 0 in the table), and a Wait saying so for each of them."""
    pending = snapshot.pending()
    if not any(j.spec.gpu_types for j in pending):  # the LP already zeroes types it cannot use
        return snapshot, []
    present = cluster_types(snapshot)
    waits: list[Action] = []
    for job in pending:
        allowed = allowed_types(job, present, model, 0.0)
        if allowed.none:
            waits.append(Wait(job.id, allowed.reason, rc.GPU_TYPE_UNAVAILABLE))
    if not waits:
        return snapshot, []
    gone = {w.job_id for w in waits}
    return ClusterSnapshot(snapshot.nodes, tuple(j for j in snapshot.jobs if j.id not in gone)), waits


def _gpu_types(snapshot: ClusterSnapshot) -> dict[str, str]:
    """uuid -> GPU type of every healthy GPU of a READY node."""
    return {
        g.uuid: g.gpu_type or gpu_type_of(g.model)
        for n in snapshot.nodes
        if n.state is NodeState.READY
        for g in n.gpus
        if g.healthy
    }
