"""Reservations for the head gang, and backfill around them: big gangs do not starve.

A non-preemptive packing policy lets a gang wait for a whole node to drain while small jobs keep
taking the GPUs that free up. :class:`GangReserve` sits in front of a policy's ``decide`` (every
packing policy has one through its :class:`~horus_core.policies.gputypes.TypeGate`) and does
what Slurm's backfill does:

- The *head gang*: among pending gangs (more than one GPU, not elastic, never started) that
  the last pass left waiting and that have queued ``wait_s`` seconds, the one holding the
  reservation; else one queued ``age_s`` or more (longest first); else the first in the
  policy's own queue order (the order of its ``Wait`` actions). A gang the policy itself
  stopped (``horus``'s least-attained-service preemption) is not reserved for: that was the
  policy's choice, and it serves it again by its own order.
- It gets a reservation: ``gpus`` GPUs of one READY node, of types it may use now, chosen where
  it is predicted to finish first: when they are free (:func:`free_times`) plus its known work
  at its solo speed on their type (unknown work: where they are free first). The reservation
  sticks until the gang starts (or the node or a GPU goes away): the policy then decides on a
  snapshot where the reserved GPUs are hidden (marked unhealthy), so no new job lands on them.
- A waiting job goes onto idle reserved GPUs (alone, as backfill) only if it is predicted to
  end before the jobs still running there: known work (``total_steps``) divided by its solo speed
  on that type. A backfilled job still running when every other reserved GPU is free is stopped.
- When all reserved GPUs are idle the gang is assigned to them, whatever the policy's order.

Remaining time of a running job: ``total_steps`` less the steps credited to it (each attempt:
its run time x solo speed x predicted speed), at that rate; with no ``total_steps`` (live
jobs rarely say) it is the time its attempt has run so far, at least ``MIN_REMAINING_S`` (a job
that ran long is expected to run long: training lengths are heavy-tailed). Estimates choose the
node and gate backfill; the wait bound does not depend on them (docs/policies.md).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel
from horus_core.model import (
    Action,
    Assign,
    ClusterSnapshot,
    Job,
    JobState,
    Node,
    Preempt,
    Wait,
)
from horus_core.packing.cluster import gpu_type
from horus_core.policies._placed import placed_view
from horus_core.policies.reservation import (
    Reservation,
    TypesOf,
    all_idle,
    allowed_on,
    free_times,
    gpu_types,
    holders,
    pools,
    predicted_rate,
    solo_seconds,
    usable,
)
from horus_core.policies.stints import Stints, follow, stints

WAIT_S = 3600.0  # a gang may become head after this long in the queue
AGE_S = 24 * 3600.0  # a gang queued this long goes ahead of the policy's order
MIN_REMAINING_S = 600.0  # unknown work: at least this long left
_MEMO = 256
_GPUS = operator.attrgetter("spec.gpus")

Decide = Callable[[ClusterSnapshot, float], list[Action]]


@dataclass
class GangReserve:
    """The reservation and its bookkeeping (see the module doc); one per policy object."""

    wait_s: float = WAIT_S
    held: Reservation | None = None
    backfilled: set[str] = field(default_factory=set)
    queued: dict[str, float] = field(default_factory=dict)  # pending gang id -> queued since
    queued_attempt: dict[str, int] = field(default_factory=dict)  # ... -> in the queue for this attempt
    attempts: dict[str, int] = field(default_factory=dict)  # active id -> its attempt
    since: dict[str, float] = field(default_factory=dict)  # active id -> when that attempt was first seen
    steps: dict[str, float] = field(default_factory=dict)  # id -> steps of its ended attempts
    runs: dict[str, Job] = field(default_factory=dict, repr=False)  # id -> its running view
    last: float | None = None
    age_s: float = AGE_S
    gangs: list[Job] = field(default_factory=list, repr=False)  # the pending gangs, this pass
    _last: list[Action] = field(default_factory=list, repr=False)  # the last pass's actions
    _waiting: dict[str, int] | None = field(default=None, repr=False)
    _views: dict[tuple[int, frozenset[str]], tuple[Node, Node]] = field(default_factory=dict, repr=False)
    _gangs: dict[str, Job] = field(default_factory=dict, repr=False)  # the pending gangs by id
    _seen: tuple[str, int] = ("", -1)  # the source and epoch of the last snapshot observed (JobChanges)

    def decide(
        self,
        snapshot: ClusterSnapshot,
        now: float,
        inner: Decide,
        model: InterferenceModel | None,
        types_of: TypesOf,
    ) -> list[Action]:
        """``inner``'s actions, around a reservation for the head gang if there is one."""
        self._observe(snapshot, now, model)
        head = self._head(snapshot, now, types_of)
        res = None if head is None else self._reserve(head, snapshot, now, model, types_of(head))
        if head is None or res is None:
            self.held = None
            self.backfilled.clear()
            return self._remember(inner(snapshot, now))
        if all_idle(res, snapshot):  # its GPUs are free: it starts there, whatever the policy's order
            return self._remember(self._start(head, res, snapshot, now, inner))
        view = snapshot.with_nodes(self._hide(snapshot.nodes, frozenset(res.gpus)))
        actions = inner(view, now)
        moved = next((a for a in actions if isinstance(a, Assign) and a.job_id == head.id), None)
        if moved is not None and self._sooner(head, moved, res, snapshot, now, model):
            return self._remember(actions)  # placed elsewhere, to finish sooner: reservation gone
        return self._remember(self._around(res, head, snapshot, actions, now, model, types_of))

    def _remember(self, actions: list[Action]) -> list[Action]:
        self._last = actions
        self._waiting = None
        return actions

    @property
    def waiting(self) -> dict[str, int]:
        """The ids the last pass left waiting -> their rank among its Waits (built when asked:
        only a pass with a gang queued ``wait_s`` or more needs it)."""
        if self._waiting is None:
            waits = (a.job_id for a in self._last if isinstance(a, Wait))
            self._waiting = {job_id: rank for rank, job_id in enumerate(waits)}
        return self._waiting

    # ------------------------------------------------------------------------ bookkeeping

    def _observe(self, snapshot: ClusterSnapshot, now: float, model: InterferenceModel | None) -> None:
        """Queue stints of pending gangs and attempt starts as first seen; an attempt that
        ended is credited its steps (no model call per running job and pass). The attempts
        follow the snapshot's changes where it has them for the last snapshot seen (the
        master's live index), else every active job is looked at, in bulk (C-level maps)."""
        changes = snapshot.changes
        delta = changes.since(*self._seen) if changes is not None else None
        now_in = stints(snapshot.active(), self.since, self.attempts, now) if delta is None else None
        self._queue(snapshot, now, delta)
        ended = _ended(self.attempts, now_in, delta)
        if ended and self.last is not None:  # those attempts ended: credit them (the last pass saw them run)
            runs = self.runs  # the last pass's view of each active job
            types = gpu_types(snapshot)
            for i in ended:
                done = max(self.last - self.since[i], 0.0) * (predicted_rate(runs[i], types, model) or 0.0)
                self.steps[i] = self.steps.get(i, 0.0) + done
        if now_in is not None:
            self.runs = dict(zip(now_in.ids, snapshot.active(), strict=True))
            self.attempts, self.since = now_in.attempts, now_in.since
        else:
            follow(delta or {}, _active, self.since, self.attempts, self.runs, now)
        self.last = now
        self._seen = (changes.source, changes.epoch) if changes is not None else ("", -1)
        if len(self.steps) > len(snapshot.jobs):
            present = {j.id for j in snapshot.jobs}
            self.steps = {k: v for k, v in self.steps.items() if k in present}

    def _queue(self, snapshot: ClusterSnapshot, now: float, delta: Mapping[str, Job | None] | None) -> None:
        """The pending gangs and since when each has queued in its attempt (``delta``: follow
        the changes; the order of :attr:`gangs` does not matter, :meth:`_head` ranks them)."""
        if delta is None:
            pending = snapshot.pending()
            gangs = list(compress(pending, map(operator.gt, map(_GPUS, pending), repeat(1))))
            queue = stints(gangs, self.queued, self.queued_attempt, now)
            self.queued, self.queued_attempt = queue.since, queue.attempts
            self._gangs = dict(zip(queue.ids, gangs, strict=True))
        else:
            follow(delta, _pending_gang, self.queued, self.queued_attempt, self._gangs, now)
        self.gangs = list(self._gangs.values())

    def _head(self, snapshot: ClusterSnapshot, now: float, types_of: TypesOf) -> Job | None:
        old = [j for j in self.gangs if now - self.queued[j.id] >= self.wait_s]
        if not old:
            return None
        waiting = self.waiting
        gangs = [j for j in old if j.attempt == 0 and not j.spec.elastic and j.id in waiting]
        held = self.held.job_id if self.held is not None else ""
        gangs.sort(key=lambda j: self._rank(j, now, held))
        for job in gangs:
            if types_of(job) != frozenset() and pools(snapshot, job, types_of(job)):
                return job
        return None

    def _rank(self, job: Job, now: float, held: str) -> tuple[int, float, str]:
        """The head is the one already holding a reservation; else a gang queued ``age_s`` or
        more (longest first); else the first in the policy's own queue order."""
        since = self.queued[job.id]
        if job.id == held:
            return (0, 0.0, job.id)
        if now - since >= self.age_s:
            return (1, since, job.id)
        return (2, float(self.waiting[job.id]), job.id)

    def remaining(
        self, job: Job, now: float, types: Mapping[str, str], model: InterferenceModel | None
    ) -> float:
        """Estimated seconds until running ``job`` ends (see the module doc)."""
        rate = predicted_rate(job, types, model)
        since = self.since.get(job.id, now)
        if job.spec.total_steps > 0 and rate:
            done = self.steps.get(job.id, 0.0) + max(now - since, 0.0) * rate
            return max(job.spec.total_steps - done, 0.0) / rate
        return max(now - since, MIN_REMAINING_S)

    # ------------------------------------------------------------------------ reservation

    def _reserve(
        self,
        head: Job,
        snapshot: ClusterSnapshot,
        now: float,
        model: InterferenceModel | None,
        allowed: frozenset[str] | None,
    ) -> Reservation | None:
        held = self.held
        if held is not None and held.job_id == head.id and usable(held, snapshot, allowed):
            return held
        self.backfilled.clear()
        types = gpu_types(snapshot)
        free = free_times(snapshot, now, lambda j: self.remaining(j, now, types, model))
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

    def _start(
        self, head: Job, res: Reservation, snapshot: ClusterSnapshot, now: float, inner: Decide
    ) -> list[Action]:
        """The gang on its reserved GPUs; the rest is the policy's, with the gang counted."""
        self.held = None
        self.backfilled.clear()
        placed = placed_view(head, res.node, res.gpus)
        view = ClusterSnapshot(snapshot.nodes, tuple(placed if j.id == head.id else j for j in snapshot.jobs))
        rest = [a for a in inner(view, now) if a.job_id != head.id]
        return [Assign(head.id, res.node, res.gpus), *rest]

    def _sooner(
        self,
        head: Job,
        moved: Assign,
        res: Reservation,
        snapshot: ClusterSnapshot,
        now: float,
        model: InterferenceModel | None,
    ) -> bool:
        """Whether the policy's placement of the head elsewhere is predicted to finish no later
        than waiting for its reservation would (unknown work: yes)."""
        types = gpu_types(snapshot)
        there = solo_seconds(head, types.get(moved.gpus[0], ""), model)
        here = solo_seconds(head, types.get(res.gpus[0], ""), model)
        if there is None or here is None:
            return True
        return (
            now + there / max(moved.predicted_slowdown, 1e-3)
            <= self._free_by(res, snapshot, now, model) + here
        )

    def _free_by(
        self, res: Reservation, snapshot: ClusterSnapshot, now: float, model: InterferenceModel | None
    ) -> float:
        """When the jobs on the reserved GPUs (backfill aside) are predicted to have ended."""
        held = holders(snapshot, res.gpus)
        others = {j for ids in held.values() for j in ids} - self.backfilled
        types = gpu_types(snapshot)
        ends = [now + self.remaining(j, now, types, model) for j in snapshot.active() if j.id in others]
        return max(ends, default=now)

    def _around(
        self,
        res: Reservation,
        head: Job,
        snapshot: ClusterSnapshot,
        actions: list[Action],
        now: float,
        model: InterferenceModel | None,
        types_of: TypesOf,
    ) -> list[Action]:
        """The policy's actions, plus backfill onto idle reserved GPUs, a stop for backfill
        that overran, and the head's reason."""
        held = holders(snapshot, res.gpus)
        there = {j for ids in held.values() for j in ids}
        others = there - self.backfilled
        free_by = self._free_by(res, snapshot, now, model)
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
        """Replace the Wait of each job that fits on idle reserved GPUs and is predicted to end
        within ``window`` (now, free by) with an Assign there (queue order, first fit)."""
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

    def _hide(self, nodes: Sequence[Node], hidden: frozenset[str]) -> tuple[Node, ...]:
        """The nodes with the GPUs of ``hidden`` marked unhealthy (the same view objects while a
        node is unchanged, so the policies' per-node caches keep hitting)."""
        if len(self._views) > _MEMO:
            self._views.clear()
        out = []
        for n in nodes:
            if not any(g.uuid in hidden for g in n.gpus):
                out.append(n)
                continue
            hit = self._views.get((id(n), hidden))
            if hit is None or hit[0] is not n:
                gpus = tuple(dataclasses.replace(g, healthy=False) if g.uuid in hidden else g for g in n.gpus)
                hit = self._views[(id(n), hidden)] = (n, dataclasses.replace(n, gpus=gpus))
            out.append(hit[1])
        return tuple(out)


# ---------------------------------------------------------------------------- pure helpers


def _active(job: Job) -> bool:
    return job.state.active


def _pending_gang(job: Job) -> bool:
    return job.state is JobState.PENDING and job.spec.gpus > 1


def _ended(
    attempts: dict[str, int], now_in: Stints | None, delta: Mapping[str, Job | None] | None
) -> list[str]:
    """The ids whose attempt seen last pass (``attempts``) is over: gone, or in another attempt
    (seen in every active job: ``now_in``; else in the changes: ``delta``)."""
    if now_in is not None:
        return [i for i in chain(attempts.keys() - now_in.attempts.keys(), now_in.changed()) if i in attempts]
    return [
        i for i, job in (delta or {}).items()
        if i in attempts and (job is None or not job.state.active or job.attempt != attempts[i])
    ]  # fmt: skip
