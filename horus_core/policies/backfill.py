"""Reservations for the head gang, and backfill around them: big gangs do not starve.

:class:`GangReserve` is a tier stage in front of every packing policy's own stages and does what
Slurm's backfill does (docs/policies.md):

- The *head gang* (pending, more than one GPU, not elastic, never started, left waiting and
  queued ``wait_s``): the one holding the reservation; else one queued ``age_s`` or more; else
  the first in the policy's own queue order.
- It reserves ``gpus`` GPUs of one READY node where it is predicted to finish first; the
  policy's stages then serve a view with those GPUs hidden, until the gang starts there.
- A waiting job goes alone onto idle reserved GPUs only if predicted to end before the jobs
  still running there; one still running when the rest are free is stopped.

A running job's remaining time: ``total_steps`` less the steps credited to it, at its predicted
rate; with no ``total_steps``, the time its attempt has run so far, at least ``MIN_REMAINING_S``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Job, Preempt, Wait
from horus_core.packing.cluster import gpu_type
from horus_core.policies.reservation import (
    WAIT_S,
    Reservation,
    TypesOf,
    all_idle,
    allowed_on,
    free_times,
    holders,
    pools,
    predicted_rate,
    solo_seconds,
    usable,
)
from horus_core.policies.state import PassState
from horus_core.policies.views import View

AGE_S = 24 * 3600.0  # a gang queued this long goes ahead of the policy's order
MIN_REMAINING_S = 600.0  # unknown work: at least this long left

Serve = Callable[[View], list[Action]]


@dataclass
class GangReserve:
    """The reservation and its bookkeeping (see the module doc); one per policy object."""

    wait_s: float = WAIT_S
    held: Reservation | None = None
    backfilled: set[str] = field(default_factory=set)
    steps: dict[str, float] = field(default_factory=dict)  # id -> steps of its ended attempts
    age_s: float = AGE_S
    _last: list[Action] = field(default_factory=list, repr=False)  # the last run's actions
    _waiting: dict[str, int] | None = field(default=None, repr=False)

    def observe(self, state: PassState, model: InterferenceModel | None) -> None:
        """Credit each attempt that ended since the last pass with its steps; forget jobs gone."""
        if state.last is not None:
            for stint in state.delta.ended:
                i = stint.job.id
                done = max(state.last - stint.since, 0.0) * (
                    predicted_rate(stint.job, state.types, model) or 0.0
                )
                self.steps[i] = self.steps.get(i, 0.0) + done
        for i, job in state.delta.changed.items():
            if job is None:
                self.steps.pop(i, None)

    def run(
        self, view: View, inner: Serve, model: InterferenceModel | None, types_of: TypesOf
    ) -> list[Action]:
        """``inner``'s actions, around a reservation for the head gang if there is one."""
        snapshot = view.snapshot
        head = self._head(view, types_of)
        res = None if head is None else self._reserve(head, view, model, types_of(head))
        if head is None or res is None:
            self.held = None
            self.backfilled.clear()
            return self._remember(inner(view))
        if all_idle(res, snapshot):  # its GPUs are free: it starts there, whatever the policy's order
            return self._remember(self._start(head, res, view, inner))
        actions = inner(view.hide_uuids(res.gpus))
        moved = next((a for a in actions if isinstance(a, Assign) and a.job_id == head.id), None)
        if moved is not None and self._sooner(head, moved, res, view, model):
            return self._remember(actions)  # placed elsewhere, to finish sooner: reservation gone
        return self._remember(self._around(res, head, view, actions, model, types_of))

    def _remember(self, actions: list[Action]) -> list[Action]:
        self._last = actions
        self._waiting = None
        return actions

    @property
    def waiting(self) -> dict[str, int]:
        """The ids the last run left waiting -> their rank among its Waits (built when asked)."""
        if self._waiting is None:
            waits = (a.job_id for a in self._last if isinstance(a, Wait))
            self._waiting = {job_id: rank for rank, job_id in enumerate(waits)}
        return self._waiting

    def _head(self, view: View, types_of: TypesOf) -> Job | None:
        state = view.state
        now, stints = state.now, state.book.stints
        gangs = (
            state.book.gangs.values() if view.jobs is None else [j for j in view.pending() if j.spec.gpus > 1]
        )
        old = [j for j in gangs if now - stints[j.id].since >= self.wait_s]
        if not old:
            return None
        waiting = self.waiting
        candidates = [j for j in old if j.attempt == 0 and not j.spec.elastic and j.id in waiting]
        held = self.held.job_id if self.held is not None else ""
        candidates.sort(key=lambda j: self._rank(j, stints[j.id].since, now, held))
        for job in candidates:
            if types_of(job) != frozenset() and pools(view.snapshot, job, types_of(job)):
                return job
        return None

    def _rank(self, job: Job, since: float, now: float, held: str) -> tuple[int, float, str]:
        """The head's order (see the module doc)."""
        if job.id == held:
            return (0, 0.0, job.id)
        if now - since >= self.age_s:
            return (1, since, job.id)
        return (2, float(self.waiting[job.id]), job.id)

    def remaining(self, job: Job, state: PassState, model: InterferenceModel | None) -> float:
        """Estimated seconds until running ``job`` ends (see the module doc)."""
        now = state.now
        rate = predicted_rate(job, state.types, model)
        stint = state.book.stints.get(job.id)
        seen = stint is not None and stint.job.state.active and stint.job.attempt == job.attempt
        since = stint.since if stint is not None and seen else now
        if job.spec.total_steps > 0 and rate:
            done = self.steps.get(job.id, 0.0) + max(now - since, 0.0) * rate
            return max(job.spec.total_steps - done, 0.0) / rate
        return max(now - since, MIN_REMAINING_S)

    # ------------------------------------------------------------------------ reservation

    def _reserve(
        self, head: Job, view: View, model: InterferenceModel | None, allowed: frozenset[str] | None
    ) -> Reservation | None:
        snapshot, state = view.snapshot, view.state
        held = self.held
        if held is not None and held.job_id == head.id and usable(held, snapshot, allowed):
            return held
        self.backfilled.clear()
        now = state.now
        free = free_times(snapshot, now, lambda j: self.remaining(j, state, model))
        best: tuple[float, float, int, str, tuple[str, ...]] | None = None
        for node, gpus in pools(snapshot, head, allowed):
            times = sorted((free[g.uuid], g.index, g.uuid) for g in gpus)[: head.spec.gpus]
            start = times[-1][0]
            done = start + (solo_seconds(head, gpu_type(gpus[0]), model) or 0.0)
            key = (done, start, sum(t > now for t, _, _ in times), node)
            if best is None or key < best[:4]:
                best = (*key, tuple(u for _, _, u in times))
        if best is None:
            return None
        self.held = Reservation(head.id, best[3], best[4], best[1])
        return self.held

    def _start(self, head: Job, res: Reservation, view: View, inner: Serve) -> list[Action]:
        """The gang on its reserved GPUs; the rest is the policy's, with the gang counted."""
        self.held = None
        self.backfilled.clear()
        rest = [a for a in inner(view.with_placed(head, res.node, res.gpus)) if a.job_id != head.id]
        return [Assign(head.id, res.node, res.gpus), *rest]

    def _sooner(
        self, head: Job, moved: Assign, res: Reservation, view: View, model: InterferenceModel | None
    ) -> bool:
        """Whether the head placed elsewhere is predicted to finish no later than on its reservation."""
        types = view.state.types
        there = solo_seconds(head, types.get(moved.gpus[0], ""), model)
        here = solo_seconds(head, types.get(res.gpus[0], ""), model)
        if there is None or here is None:
            return True
        now = view.state.now
        return now + there / max(moved.predicted_slowdown, 1e-3) <= self._free_by(res, view, model) + here

    def _free_by(self, res: Reservation, view: View, model: InterferenceModel | None) -> float:
        """When the jobs on the reserved GPUs (backfill aside) are predicted to have ended."""
        snapshot, state = view.snapshot, view.state
        held = holders(snapshot, res.gpus)
        others = {j for ids in held.values() for j in ids} - self.backfilled
        ends = [state.now + self.remaining(j, state, model) for j in snapshot.active() if j.id in others]
        return max(ends, default=state.now)

    def _around(
        self,
        res: Reservation,
        head: Job,
        view: View,
        actions: list[Action],
        model: InterferenceModel | None,
        types_of: TypesOf,
    ) -> list[Action]:
        """The policy's actions, plus backfill, a stop for backfill that overran, the head's Wait."""
        snapshot, now = view.snapshot, view.state.now
        held = holders(snapshot, res.gpus)
        there = {j for ids in held.values() for j in ids}
        others = there - self.backfilled
        free_by = self._free_by(res, view, model)
        out: list[Action] = [a for a in actions if a.job_id != head.id]
        overran = sorted(there & self.backfilled) if not others else []
        if overran:
            out += [Preempt(j, f"backfill overran: GPUs reserved for gang {head.id}") for j in overran]
        else:
            out = self._backfill(res, out, snapshot, held, (now, free_by), model, types_of)
        hours = max(free_by - now, 0.0) / 3600
        why = f"{len(res.gpus)} GPU(s) reserved for it on {res.node}, expected free in {hours:.1f} h"
        return [*out, Wait(head.id, f"next gang to start: {why}", rc.RESOURCES)]

    def _backfill(
        self,
        res: Reservation,
        actions: list[Action],
        snapshot: ClusterSnapshot,
        holders: dict[str, set[str]],
        window: tuple[float, float],
        model: InterferenceModel | None,
        types_of: TypesOf,
    ) -> list[Action]:
        """Assign waiting jobs that fit on idle reserved GPUs and end within ``window``."""
        idle = [u for u in res.gpus if not holders.get(u)]
        if not idle:
            return actions
        jobs = {j.id: j for j in snapshot.pending()}
        gpu_of = {g.uuid: g for n in snapshot.nodes for g in n.gpus}
        kind = gpu_type(gpu_of[idle[0]])
        out: list[Action] = []
        for action in actions:
            job = jobs.get(action.job_id) if isinstance(action, Wait) else None
            if job is not None and len(idle) >= job.spec.gpus and allowed_on(job, kind, types_of):
                run = solo_seconds(job, kind, model)
                if run is not None and window[0] + run <= window[1]:
                    take, idle = tuple(idle[: job.spec.gpus]), idle[job.spec.gpus :]
                    self.backfilled.add(job.id)
                    out.append(Assign(job.id, res.node, take))
                    continue
            out.append(action)
        return out
