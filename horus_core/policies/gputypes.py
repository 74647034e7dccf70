"""Which GPU types a pending job may use, and the wrapper that makes any policy honour it.

A job may run on a GPU type when its spec accepts the type (``JobSpec.gpu_types``, empty: any)
and the interference table does not say it cannot run there (solo throughput 0). With
``hetero`` on (heterogeneity-aware packing), a job is also kept off a type where it runs at
less than ``slow_ratio`` of its speed on the best type present in the cluster, until it has
queued ``max_wait_s`` seconds: the rule that judges whether a better type frees up "soon".

:class:`TypeGate` sits in front of a policy's ``decide``: jobs every type suits go to it as they
are; each group of jobs with the same narrower set is decided in a pass on a snapshot where
every other GPU is hidden (marked unhealthy), earlier passes' assignments counted as running.
Jobs a tier leaves waiting are tried on their next tier in a later pass. Around all that, its
:class:`~horus_core.policies.backfill.GangReserve` keeps GPUs for the gang that has waited
longest (``reserve=None``: off), on types the gang may use now.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel
from horus_core.model import (
    Action,
    Assign,
    ClusterSnapshot,
    Gpu,
    Job,
    LastAnswer,
    Node,
    Preempt,
    Wait,
    gpu_type_of,
)
from horus_core.packing.cluster import gpu_type
from horus_core.policies._placed import placed_view
from horus_core.policies.backfill import GangReserve

FAST_RATIO = 0.9  # a job's own fast types: within 10 % of its best
SLOW_RATIO = 0.5  # "much slower": below half the speed on the job's best type in the cluster
MAX_WAIT_S = 4 * 3600.0  # how long a job waits for a fast type before it takes a slow one
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
    # A tier per type at or above slow_ratio, fastest first, instead of the 0.9 band: tried on
    # 2869ce_cap / 24 K80+24 P100+24 V100 it was worse (horus 7.82 h against 7.55 h), so off.
    fine: bool = False


def cluster_types(snapshot: ClusterSnapshot) -> frozenset[str]:
    """The GPU types of the snapshot's ready GPUs (once per snapshot)."""
    return snapshot.derived("gputypes.present", _present)


def _present(snapshot: ClusterSnapshot) -> frozenset[str]:
    return _TYPES(snapshot.ready_gpus())  # (usually the very tuple of the last pass: no walk)


def _types_of(ready: tuple[Gpu, ...]) -> frozenset[str]:
    named = {(g.gpu_type, g.model) for g in ready}  # (few distinct: each mapped once)
    return frozenset(kind or gpu_type_of(model) for kind, model in named)


_TYPES = LastAnswer(_types_of)


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
        if rule.fine:
            known = sorted({s for t, s in speed.items() if t in usable and s is not None}, reverse=True)
            best = known[0] if known else 0.0
            tiers = [
                _fast_types(usable, speed, s / best) for s in known if best and s >= rule.slow_ratio * best
            ]
            tiers = tiers or [usable]
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


Decide = Callable[[ClusterSnapshot, float], list[Action]]


@dataclass
class TypeGate:
    """Makes a policy's ``decide`` honour each job's allowed GPU types (see the module doc)."""

    hetero: HeteroRule | None = None
    reserve: GangReserve | None = field(default_factory=GangReserve, compare=False)
    # allowed_types by what it reads: (job_type, hints, gpus, gpu_types, present, waited long).
    _memo: dict[tuple[object, ...], Allowed] = field(default_factory=dict, repr=False, compare=False)
    _views: _Views = field(default_factory=dict, repr=False, compare=False)
    _held: dict[tuple[object, ...], tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)

    def allowed(
        self, job: Job, present: frozenset[str], model: InterferenceModel | None, now: float
    ) -> Allowed:
        """:func:`allowed_types`, memoised: a job's kind decides it, not the job."""
        spec, rule = job.spec, self.hetero
        waited = rule is not None and now - job.submitted_at >= rule.max_wait_s
        key = (spec.job_type, spec.hints, spec.gpus, spec.gpu_types, present, waited)
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) > _MEMO:
                self._memo.clear()
            hit = self._memo[key] = allowed_types(job, present, model, now, rule)
        return hit

    def decide(
        self, snapshot: ClusterSnapshot, now: float, inner: Decide, model: InterferenceModel | None
    ) -> list[Action]:
        """``inner``'s actions, run once per group of jobs on the types they may use now, around
        a reservation for the head gang (:mod:`.backfill`)."""
        if self.reserve is None:
            return self._gated(snapshot, now, inner, model)
        present = cluster_types(snapshot)
        return self.reserve.decide(
            snapshot, now, lambda s, t: self._gated(s, t, inner, model), model,
            lambda job: self.widest(job, present, model, now),
        )  # fmt: skip

    def widest(
        self, job: Job, present: frozenset[str], model: InterferenceModel | None, now: float
    ) -> frozenset[str] | None:
        """Every type ``job`` may use now, its tiers together (None: any; empty: none)."""
        tiers = self.allowed(job, present, model, now).tiers
        if None in tiers:
            return None
        return frozenset().union(*(t for t in tiers if t is not None))

    def _gated(
        self, snapshot: ClusterSnapshot, now: float, inner: Decide, model: InterferenceModel | None
    ) -> list[Action]:
        pending = snapshot.pending()
        present = cluster_types(snapshot)
        # One type (or no hetero rule) and no lists: only a throughput-0 type could restrict.
        plain = (self.hetero is None or len(present) < 2) and not any(map(_LISTED, pending))
        if plain and not _any_zero(pending, present, model):
            return inner(snapshot, now)
        allowed = {j.id: self.allowed(j, present, model, now) for j in pending}
        if all(a.tiers == (None,) for a in allowed.values()):
            return inner(snapshot, now)  # every job may use every type
        out: dict[str, Action] = {
            j: Wait(j, a.reason, rc.GPU_TYPE_UNAVAILABLE) for j, a in allowed.items() if a.none
        }
        active = [j for j in snapshot.jobs if j.state.active]
        running = {j.id for j in active}
        level, todo = 0, [j for j in pending if not allowed[j.id].none]
        while todo:
            groups: Group = {}
            for job in todo:
                groups.setdefault(allowed[job.id].tiers[level], []).append(job)
            actions = [
                a for a in _passes(snapshot, groups, active, now, inner, self._views) if _real(a, running)
            ]
            out.update({a.job_id: a for a in actions})
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
        spec = job.spec
        key = (
            spec.job_type,
            spec.hints,
            spec.gpus,
            spec.gpu_types,
            present,
            now - job.submitted_at >= rule.max_wait_s,
        )
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


def _passes(
    snapshot: ClusterSnapshot, groups: Group, active: list[Job], now: float, inner: Decide, views: _Views
) -> list[Action]:
    """One policy pass per group, each on its types; ``active`` grows with what is assigned."""
    out: list[Action] = []
    for types, jobs in groups.items():
        view = ClusterSnapshot(_only(snapshot.nodes, types, views), tuple(active) + tuple(jobs))
        usable = {g.uuid for g in view.ready_gpus()}
        actions = [_inside(a, usable) for a in inner(view, now)]
        out += actions
        active += _as_running(jobs, actions)
    return out


def _real(action: Action, running: set[str]) -> bool:
    """False for a Preempt of a job an earlier pass of this call assigned (not running yet)."""
    return not isinstance(action, Preempt) or action.job_id in running


# (id of a node, types) -> (that node, its view): the same view object while the node is
# unchanged, so the policies' per-node caches keep hitting across passes and calls.
_Views = dict[tuple[int, frozenset[str] | None], tuple[Node, Node]]


def _only(nodes: Sequence[Node], types: frozenset[str] | None, views: _Views) -> tuple[Node, ...]:
    """The nodes with every GPU not of ``types`` marked unhealthy (None: as they are)."""
    if types is None:
        return tuple(nodes)
    if len(views) > _MEMO:
        views.clear()
    out = []
    for n in nodes:
        hit = views.get((id(n), types))
        if hit is None or hit[0] is not n:
            gpus = tuple(g if gpu_type(g) in types else dataclasses.replace(g, healthy=False) for g in n.gpus)
            hit = views[(id(n), types)] = (n, dataclasses.replace(n, gpus=gpus))
        out.append(hit[1])
    return tuple(out)


def _inside(action: Action, usable: set[str]) -> Action:
    """``action``, or a Wait in place of an Assign onto GPUs the view did not offer (of another
    type; on any of the gang's nodes): every job keeps an answer."""
    if isinstance(action, Assign) and not usable.issuperset(action.gpus):
        return Wait(action.job_id, "placed outside the GPU types it may use now", rc.GPU_TYPE_UNAVAILABLE)
    return action


def _as_running(jobs: Sequence[Job], actions: Sequence[Action]) -> list[Job]:
    """The jobs this pass assigned, as the next pass must see them: on their GPUs."""
    by_id = {j.id: j for j in jobs}
    return [
        placed_view(by_id[a.job_id], a.node, a.gpus)
        for a in actions
        if isinstance(a, Assign) and a.job_id in by_id
    ]
