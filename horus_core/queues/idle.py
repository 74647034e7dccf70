"""The idle GPUs a waiting job could use, per node and GPU type: reclaim and priority preemption
count only GPUs of the types the job may use now, in the shapes it can use (a gang's GPUs per
node), so an idle GPU of another type never stands in for the GPUs a preemption would free."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from horus_core.model import ClusterSnapshot, Job, gpu_type_of
from horus_core.policies.base import Policy
from horus_core.policies.gputypes import TypeGate, cluster_types
from horus_core.queues.ledger import Ledger, borrowed, demand, job_queue
from horus_core.queues.victims import Candidate

Types = frozenset[str] | None  # the GPU types a job may use now (None: any)


def fits(types: Types, gpu_type: str) -> bool:
    return types is None or gpu_type in types


@dataclass
class IdleGpus:
    """Idle GPUs per node and type, and per type in all; taken by the jobs counted on them,
    added to by preemptions. Costs stay per type for plain jobs: only a gang walks nodes."""

    free: dict[tuple[str, str], int] = field(default_factory=dict)  # (node, type) -> idle GPUs
    where: dict[str, tuple[str, str]] = field(default_factory=dict)  # uuid -> (node, type)
    total: dict[str, int] = field(default_factory=dict)  # type -> idle GPUs
    present: frozenset[str] = frozenset()  # the types of every ready GPU, idle or not
    # type -> its (node, type) keys in order, and how far takes have emptied them
    _keys: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _at: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, running: Sequence[Job]) -> IdleGpus:
        busy = {u for j in running for u in j.gpus}
        out = cls()
        for g in snapshot.ready_gpus():
            key = (g.node, g.gpu_type or gpu_type_of(g.model))
            out.where[g.uuid] = key
            if g.uuid not in busy:
                out.free[key] = out.free.get(key, 0) + 1
                out.total[key[1]] = out.total.get(key[1], 0) + 1
        out.present = frozenset(t for _, t in out.where.values())
        for key in sorted(out.free):
            out._keys.setdefault(key[1], []).append(key)
        return out

    def usable(self, job: Job, types: Types) -> int:
        """How many of the idle GPUs ``job`` could be given: of its types, and for a gang of
        ``gpus_per_node`` GPUs per node, only whole parts of it on each node."""
        per = job.spec.gpus_per_node
        if per <= 0:
            return sum(n for t, n in self.total.items() if fits(types, t))
        by_node: dict[str, int] = {}
        for (node, t), n in self.free.items():
            if n > 0 and fits(types, t):
                by_node[node] = by_node.get(node, 0) + n
        return sum(n - n % per for n in by_node.values())

    def take(self, job: Job, types: Types, count: int) -> None:
        """Count ``count`` usable GPUs as taken by ``job`` (whole parts for a gang)."""
        per = max(1, job.spec.gpus_per_node)
        for t in sorted(self.total):
            if count <= 0:
                return
            if not fits(types, t):
                continue
            keys = self._keys.get(t, [])
            i = self._at.get(t, 0) if per == 1 else 0  # (before the cursor: nothing idle)
            while count > 0 and i < len(keys):
                key = keys[i]
                have = self.free[key]
                n = min(have - have % per, count)
                self.free[key] = have - n
                self.total[t] -= n
                count -= n
                if count > 0 or self.free[key] == 0:
                    i += 1
            if per == 1:
                self._at[t] = i

    def add(self, uuids: Iterable[str]) -> None:
        """GPUs a preemption frees."""
        for u in uuids:
            key = self.where.get(u)
            if key is not None:
                if key not in self.free:
                    self._keys.setdefault(key[1], []).append(key)
                self.free[key] = self.free.get(key, 0) + 1
                self.total[key[1]] = self.total.get(key[1], 0) + 1
                self._at[key[1]] = 0  # (rare: look at every node of the type again)

    def kinds(self, uuids: Iterable[str]) -> frozenset[str]:
        """The GPU types of ``uuids``."""
        return frozenset(self.where.get(u, ("", ""))[1] for u in uuids)


@dataclass
class Victims:
    """The preemption candidates, and those whose GPUs are all of a set of types (memoised per
    set until a candidate is taken): a job is preempted only for a job that could use its GPUs."""

    cands: list[Candidate]
    idle: IdleGpus
    _kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    _memo: dict[Types, list[Candidate]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._kinds = {c.job.id: self.idle.kinds(c.job.gpus) for c in self.cands}

    def of(self, types: Types) -> list[Candidate]:
        if types is None or types >= self.idle.present:
            return self.cands
        hit = self._memo.get(types)
        if hit is None:
            hit = self._memo[types] = [c for c in self.cands if self._kinds[c.job.id] <= types]
        return hit

    def remove(self, c: Candidate) -> None:
        self.cands.remove(c)
        self._memo.clear()


def usable_types(
    inner: Policy, job: Job, snapshot: ClusterSnapshot, now: float, ledger: Ledger | None
) -> Types:
    """The GPU types ``job`` may be placed on now: those it accepts, narrowed by the inner
    policy's type rule where it has one (e.g. a much slower type only after hours of waiting),
    and, given the ``ledger``, by its queue: only types on which the queue stays within its
    borrowing limit."""
    present = cluster_types(snapshot)
    gate = getattr(inner, "gate", None)
    if isinstance(gate, TypeGate):
        types = gate.widest(job, present, getattr(inner, "model", None), now)
    else:
        types = frozenset(job.spec.gpu_types) or None
    if ledger is None:
        return types
    name = job_queue(ledger.config, job)
    queue = ledger.config.queues.get(name)
    if queue is None:
        return types
    used, need = ledger.used(name), demand(job)
    room = frozenset(
        t for t in present if borrowed(queue, {**used, t: used.get(t, 0) + need}) <= queue.borrowing_limit
    )
    return room if types is None else types & room
