"""Which GPU types a pending job may use, and the wrapper that makes any policy honour it.

A job may run on a GPU type when its spec accepts the type (``JobSpec.gpu_types``, empty: any)
and the interference table does not say it cannot run there (solo throughput 0). With
``hetero`` on (heterogeneity-aware packing), a job is also kept off a type where it runs at
less than ``slow_ratio`` of its speed on the best type present in the cluster, until it has
queued ``max_wait_s`` seconds: the rule that judges whether a better type frees up "soon".
With ``allocate`` on as well (``horus``), each pass first gives every job in reach a type by an
allocation over effective throughput (:mod:`.allocate`): a pending job tries its allocated type
before those tiers, and running jobs move up to a type that frees (:mod:`.upgrade`).

:class:`TypeGate` is the tier stage in front of a policy's own stages: jobs every type suits go
to them as they are; each group of jobs with the same narrower set is served on a view of the
pass where every other GPU is hidden, earlier groups' assignments shown as running. Jobs a group
leaves waiting are tried on their next tier after every group of this one. Around all that, its
:class:`~horus_core.policies.backfill.GangReserve` keeps GPUs for the gang that has waited
longest (``reserve=None``: off), on types the gang may use now.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Job, Preempt, Wait
from horus_core.packing.cluster import gpu_type
from horus_core.policies.allocate import allocate
from horus_core.policies.backfill import GangReserve
from horus_core.policies.upgrade import upgrades
from horus_core.policies.views import View, placed_views

FAST_RATIO = 0.9  # a job's own fast types: within 10 % of its best
SLOW_RATIO = 0.5  # "much slower": below half the speed on the job's best type in the cluster
MAX_WAIT_S = 4 * 3600.0  # how long a job waits for a fast type before it takes a slow one
SLOTS = 2.0  # the allocation's jobs per GPU: one alone plus one sharing at its pair speed
_MEMO = 4096  # memoised kinds per gate


@dataclass(frozen=True)
class Allowed:
    """The types a job may use now, best tier first (None: every type), or why it may use none.

    A job is tried on ``tiers[0]``; if it does not fit there, on ``tiers[1]``, and so on."""

    tiers: tuple[frozenset[str] | None, ...]
    reason: str = ""

    @property
    def none(self) -> bool:
        return not self.tiers


@dataclass(frozen=True)
class HeteroRule:
    """Heterogeneity-aware placement: tried first on the types where the job runs at least
    ``fast_ratio`` of its best speed, then on those above ``slow_ratio``; below that only
    after ``max_wait_s`` seconds in the queue (a faster type did not free up soon enough)."""

    fast_ratio: float = FAST_RATIO
    slow_ratio: float = SLOW_RATIO
    max_wait_s: float = MAX_WAIT_S
    # Each pass: a type per job by the allocation (tried first), and moves of running jobs up to
    # the type they are given when it frees (:mod:`.allocate`, :mod:`.upgrade`).
    allocate: bool = False
    slots: float = SLOTS  # jobs per GPU the allocation counts on (one alone, the rest sharing)


def cluster_types(snapshot: ClusterSnapshot) -> frozenset[str]:
    """The GPU types of the snapshot's ready GPUs."""
    return frozenset(gpu_type(g) for g in snapshot.ready_gpus())


def allowed_types(
    job: Job,
    present: frozenset[str],
    model: InterferenceModel | None,
    now: float,
    rule: HeteroRule | None = None,
) -> Allowed:
    """The GPU types of ``present`` that ``job`` may be placed on now, in tiers (pure)."""
    spec = job.spec
    if not present:
        return Allowed((None,))  # no ready GPU at all: the policy says so itself
    usable = frozenset(t for t in present if spec.accepts_type(t))
    if not usable:
        return Allowed((), f"no GPU of type {', '.join(spec.gpu_types)} in the cluster")
    speed = _solo_speeds(job, usable, model)
    zero = sorted(t for t, s in speed.items() if s is not None and s <= 0.0)
    usable -= set(zero)
    if not usable:
        return Allowed((), f"cannot run on {', '.join(zero)} (throughput 0 in the table)")
    tiers = [usable]
    if rule is not None:
        tiers = [_fast_types(usable, speed, rule.fast_ratio), _fast_types(usable, speed, rule.slow_ratio)]
        if now - job.submitted_at >= rule.max_wait_s:
            tiers.append(usable)
    out: list[frozenset[str] | None] = []
    for tier in tiers:
        t = None if tier == present else tier
        if not out or out[-1] != t:
            out.append(t)
    return Allowed(tuple(out))


def _any_zero(pending: Sequence[Job], present: frozenset[str], model: InterferenceModel | None) -> bool:
    """Whether the table gives any pending job's kind throughput 0 on a type here."""
    if model is None or not model.has_zero_solo(present):
        return False
    sig = model.signature  # (a job type is its own signature: the call only for the others)
    kinds = {(s.job_type or sig(s), s.gpus if s.gpus > 1 else 1) for s in [j.spec for j in pending]}
    return any(model.solo_throughput(k, g, t) == 0.0 for k, g in kinds for t in present)


def _solo_speeds(job: Job, types: frozenset[str], model: InterferenceModel | None) -> dict[str, float | None]:
    if model is None:
        return {}
    sig = model.signature(job.spec)
    return {t: model.solo_throughput(sig, max(1, job.spec.gpus), t) for t in types}


def _fast_types(usable: frozenset[str], speed: dict[str, float | None], ratio: float) -> frozenset[str]:
    """The types where the job runs at least ``ratio`` of its best known speed (unknown: kept)."""
    known = {t: s for t, s in speed.items() if t in usable and s is not None}
    if not known:
        return usable
    best = max(known.values())
    return frozenset(t for t in usable if t not in known or known[t] >= ratio * best)


_LISTED = operator.attrgetter("spec.gpu_types")  # a job's list of allowed GPU types (() = any)

Group = dict[frozenset[str] | None, list[Job]]
Serve = Callable[[View], list[Action]]


@dataclass
class TypeGate:
    """The GPU-type tiers of a pass (see the module doc), around the head gang's reservation."""

    hetero: HeteroRule | None = None
    reserve: GangReserve | None = field(default_factory=GangReserve, compare=False)
    # allowed_types by what it reads: (job_type, hints, gpus, gpu_types, present, waited long).
    _memo: dict[tuple[object, ...], Allowed] = field(default_factory=dict, repr=False, compare=False)
    _held: dict[tuple[object, ...], tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)

    def allowed(
        self, job: Job, present: frozenset[str], model: InterferenceModel | None, now: float
    ) -> Allowed:
        """:func:`allowed_types`, memoised: a job's kind decides it, not the job."""
        key = self._kind(job, present, now)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) > _MEMO:
                self._memo.clear()
            hit = self._memo[key] = allowed_types(job, present, model, now, self.hetero)
        return hit

    def _kind(self, job: Job, present: frozenset[str], now: float) -> tuple[object, ...]:
        """What :func:`allowed_types` reads of a job: its kind, and whether it waited long."""
        spec, rule = job.spec, self.hetero
        waited = rule is not None and now - job.submitted_at >= rule.max_wait_s
        return (spec.job_type, spec.hints, spec.gpus, spec.gpu_types, present, waited)

    def run(self, view: View, serve: Serve, model: InterferenceModel | None) -> list[Action]:
        """``serve``'s actions, once per group of jobs on the types they may use now, around a
        reservation for the head gang (:mod:`.backfill`); with ``allocate``, the types the
        allocation gives tried first and the moves up after."""
        target = self._allocation(view, model)

        def gated(v: View) -> list[Action]:
            return self._gated(v, serve, model, target)

        if self.reserve is None:
            actions = gated(view)
        else:
            present, now = view.present, view.state.now
            actions = self.reserve.run(view, gated, model, lambda job: self.widest(job, present, model, now))
        if target is not None and model is not None and self.hetero is not None:
            actions += upgrades(view, actions, model, self.hetero.fast_ratio, target)
        return actions

    def _allocation(self, view: View, model: InterferenceModel | None) -> dict[str, str] | None:
        """The pass's allocation over the running jobs (each on the type it runs on) and the
        pending ones; None where the rule asks for none, or the view has one type."""
        rule = self.hetero
        if rule is None or not rule.allocate or model is None or len(view.present) < 2:
            return None
        types = view.state.types
        active = view.active()
        here = {j.id: types[j.gpus[0]] for j in active if j.gpus}
        return allocate([*active, *view.pending()], Counter(view.layout.types), model, rule.slots, here)

    def widest(
        self, job: Job, present: frozenset[str], model: InterferenceModel | None, now: float
    ) -> frozenset[str] | None:
        """Every type ``job`` may use now, its tiers together (None: any; empty: none)."""
        tiers = self.allowed(job, present, model, now).tiers
        if None in tiers:
            return None
        return frozenset().union(*(t for t in tiers if t is not None))

    def _gated(
        self, view: View, serve: Serve, model: InterferenceModel | None, target: Mapping[str, str] | None
    ) -> list[Action]:
        pending, present, now = view.pending(), view.present, view.state.now
        # One type (or no hetero rule) and no lists: only a throughput-0 type could restrict.
        plain = (self.hetero is None or len(present) < 2) and not any(map(_LISTED, pending))
        if plain and not _any_zero(pending, present, model):
            return serve(view)
        allowed = {j.id: self.allowed(j, present, model, now) for j in pending}
        if target:
            allowed = {i: _first(target.get(i), a) for i, a in allowed.items()}
        if all(a.tiers == (None,) for a in allowed.values()):
            return serve(view)  # every job may use every type
        out: dict[str, Action] = {
            j: Wait(j, a.reason, rc.GPU_TYPE_UNAVAILABLE) for j, a in allowed.items() if a.none
        }
        active = list(view.active())
        running, placed = {j.id for j in active}, list[Job]()
        level, todo = 0, [j for j in pending if not allowed[j.id].none]
        while todo:
            groups: Group = {}
            for job in todo:
                groups.setdefault(allowed[job.id].tiers[level], []).append(job)
            for types, jobs in groups.items():
                tier = view.serving(active, placed, jobs)
                if types is not None:
                    tier = tier.hide(view.state.layout.not_of(types))
                usable = set(tier.layout.gpu_uuids)
                actions = [_inside(a, usable) for a in serve(tier)]
                out.update({a.job_id: a for a in actions if _real(a, running)})
                placed += placed_views(jobs, actions)
            level += 1
            todo = [j for j in todo if isinstance(out.get(j.id), Wait) and len(allowed[j.id].tiers) > level]
        waits = [a for a in out.values() if isinstance(a, Wait)]
        if self.hetero is not None:
            by_id = {j.id: j for j in pending}
            waits = [self._held_off(w, by_id[w.job_id], present, model, now) for w in waits]
        return [a for a in out.values() if not isinstance(a, Wait)] + waits

    def _held_off(
        self, wait: Wait, job: Job, present: frozenset[str], model: InterferenceModel | None, now: float
    ) -> Wait:
        """``wait`` with a note when the rule keeps the job off types it accepts: which, and
        after how long it takes them (memoised by the job's kind, as :meth:`allowed`)."""
        rule = self.hetero
        if rule is None or wait.code == rc.GPU_TYPE_UNAVAILABLE:
            return wait
        spec, key = job.spec, self._kind(job, present, now)
        held = self._held.get(key)
        if held is None:
            if len(self._held) > _MEMO:
                self._held.clear()
            tiers = self.allowed(job, present, model, now).tiers
            speed = _solo_speeds(job, present, model) if None not in tiers else {}
            held = self._held[key] = tuple(
                sorted(
                    t for t in present
                    if None not in tiers and spec.accepts_type(t) and speed.get(t) != 0.0
                    and not any(t in tier for tier in tiers if tier)
                )
            )  # fmt: skip
        if not held:
            return wait
        note = (
            f"{', '.join(held)} GPUs run it below {rule.slow_ratio:.0%} of its speed on its best type: "
            f"taken only after {rule.max_wait_s / 3600.0:g} h in the queue"
        )
        return Wait(wait.job_id, f"{wait.reason}; {note}" if wait.reason else note, wait.code)


def _first(given: str | None, allowed: Allowed) -> Allowed:
    """``allowed`` with ``given``, the type the pass's allocation gives the job, tried first."""
    if given is None or allowed.none or allowed.tiers[0] == frozenset({given}):
        return allowed
    return Allowed((frozenset({given}), *allowed.tiers), allowed.reason)


def _real(action: Action, running: set[str]) -> bool:
    """False for a Preempt of a job an earlier tier of this pass assigned (not running yet)."""
    return not isinstance(action, Preempt) or action.job_id in running


def _inside(action: Action, usable: set[str]) -> Action:
    """``action``, or a Wait in place of an Assign onto GPUs the view did not offer (of another
    type; on any of the gang's nodes): every job keeps an answer."""
    if isinstance(action, Assign) and not usable.issuperset(action.gpus):
        return Wait(action.job_id, "placed outside the GPU types it may use now", rc.GPU_TYPE_UNAVAILABLE)
    return action
