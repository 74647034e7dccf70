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

Types = frozenset[str] | None  # the GPU types a job may use now (None: any)


def fits(types: Types, gpu_type: str) -> bool:
    return types is None or gpu_type in types


@dataclass
class IdleGpus:
    """Idle GPUs per node and type; taken by the jobs counted on them, added to by preemptions."""

    free: dict[tuple[str, str], int] = field(default_factory=dict)  # (node, type) -> idle GPUs
    where: dict[str, tuple[str, str]] = field(default_factory=dict)  # uuid -> (node, type)

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, running: Sequence[Job]) -> IdleGpus:
        busy = {u for j in running for u in j.gpus}
        out = cls()
        for g in snapshot.ready_gpus():
            key = (g.node, g.gpu_type or gpu_type_of(g.model))
            out.where[g.uuid] = key
            if g.uuid not in busy:
                out.free[key] = out.free.get(key, 0) + 1
        return out

    def usable(self, job: Job, types: Types) -> int:
        """How many of the idle GPUs ``job`` could be given: of its types, and for a gang of
        ``gpus_per_node`` GPUs per node, only whole parts of it on each node."""
        per = job.spec.gpus_per_node
        by_node: dict[str, int] = {}
        for (node, t), n in self.free.items():
            if n > 0 and fits(types, t):
                by_node[node] = by_node.get(node, 0) + n
        return sum(n - n % per if per > 0 else n for n in by_node.values())

    def take(self, job: Job, types: Types, count: int) -> None:
        """Count ``count`` usable GPUs as taken by ``job`` (whole parts first for a gang)."""
        per = max(1, job.spec.gpus_per_node)
        for key in sorted(self.free):
            if count <= 0:
                return
            if fits(types, key[1]):
                n = min(self.free[key] - self.free[key] % per, count)
                self.free[key] -= n
                count -= n

    def add(self, uuids: Iterable[str]) -> None:
        """GPUs a preemption frees."""
        for u in uuids:
            key = self.where.get(u)
            if key is not None:
                self.free[key] = self.free.get(key, 0) + 1

    def all_of(self, uuids: Iterable[str], types: Types) -> bool:
        """Whether every GPU of ``uuids`` is of ``types`` (a victim worth preempting for them)."""
        return all(fits(types, self.where.get(u, ("", ""))[1]) for u in uuids)


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
