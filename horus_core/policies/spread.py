"""Choosing the nodes and GPUs of a gang from the free GPUs per node and the racks (pure).

Preference, in this order: one node (best fit: the fewest free GPUs that still hold the gang),
then the fewest nodes within one rack, then the fewest racks (and within them the fewest nodes).
A plan is all or none: it holds exactly the GPUs asked for, or there is no plan. Nodes with no
rack name (``rack == ""``) count as one unnamed rack. A plan never mixes GPU kinds (types).

The result lists GPUs in rank order: all GPUs of the rank-0 node first (the node with the most
GPUs of the gang), then rank 1, and so on; ``Assign.node`` is the rank-0 node.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Container, Iterable, Sequence
from dataclasses import dataclass

from horus_core import reasoncodes as rc
from horus_core.model import ClusterSnapshot, Job, JobSpec, NodeState, Wait
from horus_core.packing.cluster import gpu_type


@dataclass(frozen=True, slots=True)
class FreeNode:
    """What a node offers a gang: its free GPUs (in index order), rack and GPU kind."""

    name: str
    free: tuple[str, ...]
    rack: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Shape:
    """The gang's size and optional shape: ``gpus_per_node`` GPUs on each of ``nodes`` nodes (0: any)."""

    gpus: int
    gpus_per_node: int = 0
    nodes: int = 0

    def per_node(self) -> tuple[int, int] | None:
        """``(GPUs per node, node count)`` for a fixed shape, None for any; ValueError if invalid."""
        g, p, n = self.gpus, self.gpus_per_node, self.nodes
        if p <= 0 and n <= 0:
            return None
        if p > 0 and n > 0:
            if p * n != g:
                raise ValueError(f"{n} node(s) x {p} GPU(s) is not {g} GPU(s)")
            return p, n
        if p > 0:
            if g % p:
                raise ValueError(f"{g} GPU(s) do not split into nodes of {p}")
            return p, g // p
        if g % n:
            raise ValueError(f"{g} GPU(s) do not split evenly over {n} node(s)")
        return g // n, n


@dataclass(frozen=True, slots=True)
class Spread:
    """A gang's placement: ``parts`` are (node, GPUs taken there) in rank order."""

    parts: tuple[tuple[str, tuple[str, ...]], ...]
    racks: int

    @property
    def node(self) -> str:
        return self.parts[0][0]

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(u for _, uuids in self.parts for u in uuids)

    @property
    def nodes(self) -> int:
        return len(self.parts)


class Pool:
    """Free GPUs indexed per GPU kind, rack and free count for many gang choices in one pass
    (:meth:`take` after each): the first rack that holds the gang on the fewest nodes wins."""

    def __init__(self, free: Iterable[FreeNode]) -> None:
        self.nodes: dict[str, FreeNode] = {}
        groups: dict[str, list[FreeNode]] = {}
        for node in free:
            self.nodes[node.name] = node
            groups.setdefault(node.kind, []).append(node)
        self.kinds: dict[str, _Kind] = {kind: _Kind.of(members) for kind, members in groups.items()}
        self._full: set[Shape] = set()  # shapes that found no room (none will, in this pool)

    def choose(self, shape: Shape) -> Spread | None:
        """The best placement of ``shape`` (see the module doc), or None."""
        if shape.gpus < 1:
            raise ValueError(f"a gang needs at least 1 GPU, got {shape.gpus}")
        fixed = shape.per_node()
        plans = [self._plan(k, shape.gpus, fixed) for k in self.kinds.values() if k.total >= shape.gpus]
        found = [p for p in plans if p is not None]
        return min(found, key=_rank)[1] if found else None

    def place(self, shape: Shape) -> Spread | str:
        """:meth:`choose`, or the reason the gang waits (a shape found full stays full)."""
        if shape in self._full:
            return self.describe(shape)
        try:
            plan = self.choose(shape)
        except ValueError as exc:
            return f"gang shape: {exc}"
        if plan is None:
            self._full.add(shape)
            return self.describe(shape)
        return plan

    def take(self, plan: Spread) -> None:
        """Mark the plan's GPUs used."""
        for name, uuids in plan.parts:
            self.remove(name, uuids)

    def remove(self, name: str, uuids: Collection[str]) -> None:
        """Mark the GPUs ``uuids`` of node ``name`` used (those of them that are free)."""
        node = self.nodes[name]
        left = FreeNode(node.name, tuple(u for u in node.free if u not in uuids), node.rack, node.kind)
        if len(left.free) < len(node.free):
            self.nodes[name] = left
            self.kinds[node.kind].moved(node, left)

    def _plan(self, kind: _Kind, need: int, fixed: tuple[int, int] | None) -> _Plan | None:
        if fixed is None or fixed == (need, 1):
            fit = kind.best_fit(need)
            if fit is not None:  # one node: nothing beats it
                return _made([(self.nodes[fit], need)])
            if fixed is not None:
                return None
        best: _Plan | None = None
        perfect = (1, -(-need // max(kind.largest(), 1)))
        for rack in kind.holding(need):
            names = kind.racks[rack]
            plan = _take(need, fixed, [n for n in map(self.nodes.__getitem__, names) if n.free])
            if plan is not None and (best is None or plan[0] < best[0]):
                best = plan
                if fixed is None and plan[0][:2] == perfect:
                    break  # the fewest nodes possible: the first such rack (first fit)
        if best is not None:
            return best
        racks = {
            r: [n for n in map(self.nodes.__getitem__, names) if n.free] for r, names in kind.racks.items()
        }
        return _across(need, fixed, racks)

    def describe(self, shape: Shape) -> str:
        """Why ``shape`` does not fit now: the reason a waiting gang shows."""
        counts = [(c, len(names)) for k in self.kinds.values() for c, names in k.by_free.items() if names]
        total = sum(c * n for c, n in counts)
        nodes = sum(n for _, n in counts)
        largest = max((c for c, _ in counts), default=0)
        fixed = shape.per_node()
        if fixed == (shape.gpus, 1):
            return f"needs {shape.gpus} free GPU(s) on one node, largest free set is {largest}"
        if fixed is not None:
            per, count = fixed
            have = sum(n for c, n in counts if c >= per)
            return f"needs {count} node(s) with {per} free GPU(s) each, {have} have that many"
        return f"needs {shape.gpus} free GPU(s), {total} free on {nodes} node(s) (largest set {largest})"


class _Kind:
    """One GPU kind's free GPUs: per rack its nodes and free total, nodes by free count."""

    def __init__(self) -> None:
        self.racks: dict[str, list[str]] = {}
        self.rack_total: dict[str, int] = {}
        self.by_free: dict[int, list[str]] = {}  # free count (> 0) -> node names, sorted
        self.total = 0

    def holding(self, need: int) -> list[str]:
        """The racks (in order) with at least ``need`` free GPUs."""
        return [r for r, total in self.rack_total.items() if total >= need]

    @staticmethod
    def of(nodes: Sequence[FreeNode]) -> _Kind:
        """The kind holding ``nodes``: racks in first-seen order, free counts indexed."""
        k = _Kind()
        racks, rack_total, by_free = k.racks, k.rack_total, k.by_free
        for node in nodes:
            n = len(node.free)
            racks.setdefault(node.rack, []).append(node.name)
            rack_total[node.rack] = rack_total.get(node.rack, 0) + n
            if n:
                by_free.setdefault(n, []).append(node.name)
            k.total += n
        for names in by_free.values():
            names.sort()
        return k

    def moved(self, old: FreeNode, new: FreeNode) -> None:
        gone = len(old.free) - len(new.free)
        self.rack_total[old.rack] -= gone
        self.total -= gone
        self.by_free[len(old.free)].remove(old.name)
        if new.free:
            bisect.insort(self.by_free.setdefault(len(new.free), []), new.name)

    def best_fit(self, need: int) -> str | None:
        fits = [c for c, names in self.by_free.items() if c >= need and names]
        return self.by_free[min(fits)][0] if fits else None

    def largest(self) -> int:
        return max((c for c, names in self.by_free.items() if names), default=0)


_Plan = tuple[tuple[int, int, int, tuple[str, ...]], Spread]


def _rank(plan: _Plan) -> tuple[int, int, int, tuple[str, ...]]:
    return plan[0]


def _across(need: int, fixed: tuple[int, int] | None, racks: dict[str, list[FreeNode]]) -> _Plan | None:
    """Fewest racks: racks by what they can give (most first), added until the gang fits."""
    usable = {r: _usable(members, fixed) for r, members in racks.items()}
    order = sorted(usable, key=lambda r: (-usable[r], r))
    chosen: list[FreeNode] = []
    for rack in order:
        chosen += racks[rack]
        plan = _take(need, fixed, chosen)
        if plan is not None:
            return plan
    return None


def _usable(members: Sequence[FreeNode], fixed: tuple[int, int] | None) -> int:
    if fixed is None:
        return sum(len(n.free) for n in members)
    per, _ = fixed
    return per * sum(1 for n in members if len(n.free) >= per)


def _take(need: int, fixed: tuple[int, int] | None, nodes: Sequence[FreeNode]) -> _Plan | None:
    """The fewest nodes of ``nodes`` that hold the gang, or None."""
    if fixed is not None:
        return _take_fixed(fixed, nodes)
    fits = [n for n in nodes if len(n.free) >= need]
    if fits:  # one node, best fit
        best = min(fits, key=lambda n: (len(n.free), n.name))
        return _made([(best, need)])
    big = sorted(nodes, key=lambda n: (-len(n.free), n.name))
    parts: list[tuple[FreeNode, int]] = []
    left = need
    for i, node in enumerate(big):
        last = [n for n in big[i:] if len(n.free) >= left]
        if last:  # the remainder fits on one node: the tightest such node closes the gang
            parts.append((min(last, key=lambda n: (len(n.free), n.name)), left))
            return _made(parts)
        parts.append((node, len(node.free)))
        left -= len(node.free)
    return None


def _take_fixed(fixed: tuple[int, int], nodes: Sequence[FreeNode]) -> _Plan | None:
    per, count = fixed
    fits = sorted((n for n in nodes if len(n.free) >= per), key=lambda n: (len(n.free), n.name))
    if len(fits) < count:
        return None
    return _made([(n, per) for n in fits[:count]])


def _made(parts: list[tuple[FreeNode, int]]) -> _Plan:
    ranked = sorted(parts, key=lambda p: (-p[1], p[0].name))
    spread = Spread(
        parts=tuple((n.name, n.free[:k]) for n, k in ranked),
        racks=len({n.rack for n, _ in parts}),
    )
    used = sum(len(n.free) for n, _ in parts)
    return (spread.racks, len(parts), used, tuple(n.name for n, _ in ranked)), spread


def wait(job: Job, reason: str, snapshot: ClusterSnapshot) -> Wait:
    """The Wait of a gang that cannot be placed now: ``GangTooLarge`` when the cluster could
    never hold it, else ``Resources``."""
    return wait_for(job, reason, sum(len(n.gpus) for n in snapshot.nodes))


def wait_for(job: Job, reason: str, total: int) -> Wait:
    """:func:`wait` where the cluster has ``total`` GPUs."""
    too_large = job.spec.gpus > total or reason.startswith("gang shape")
    return Wait(job.id, reason, rc.GANG_TOO_LARGE if too_large else rc.RESOURCES)


def shape_of(spec: JobSpec, largest: int) -> Shape:
    """The shape to place: the spec's own where it spans nodes, else one node."""
    if spec_spans(spec, largest):
        return Shape(spec.gpus, spec.gpus_per_node, spec.nodes)
    return Shape(spec.gpus, nodes=1)


def free_nodes(snapshot: ClusterSnapshot, taken: Container[str]) -> list[FreeNode]:
    """Each READY node's healthy GPUs not in ``taken``, in index order, with rack and kind."""
    out = []
    for node in snapshot.nodes:
        if node.state is not NodeState.READY:
            continue
        gpus = sorted((g for g in node.gpus if g.healthy), key=lambda g: g.index)
        kind = gpu_type(gpus[0]) if gpus else ""
        out.append(FreeNode(node.name, tuple(g.uuid for g in gpus if g.uuid not in taken), node.rack, kind))
    return out


def spec_spans(spec: JobSpec, largest: int) -> bool:
    """Whether a job must be spread over nodes: its shape asks for more than one node, or it is
    larger than the largest READY node (``largest``; 0: no ready GPU, never)."""
    if largest == 0:
        return False
    return spec.nodes > 1 or 0 < spec.gpus_per_node < spec.gpus or spec.gpus > largest


def largest_node(snapshot: ClusterSnapshot) -> int:
    """The most healthy GPUs on one READY node."""
    ready = (n for n in snapshot.nodes if n.state is NodeState.READY)
    return max((sum(g.healthy for g in n.gpus) for n in ready), default=0)
