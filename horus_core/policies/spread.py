"""Choosing the nodes and GPUs of a gang from the free GPUs per node and the racks (pure).

Preference, in this order: one node (best fit: the fewest free GPUs that still hold the gang),
then the fewest nodes within one rack, then the fewest racks (and within them the fewest nodes).
A plan is all or none: it holds exactly the GPUs asked for, or there is no plan. Nodes with no
rack name (``rack == ""``) count as one unnamed rack. A plan never mixes GPU kinds (types).

The result lists GPUs in rank order: all GPUs of the rank-0 node first (the node with the most
GPUs of the gang), then rank 1, and so on; ``Assign.node`` is the rank-0 node.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass

from horus_core.model import ClusterSnapshot, Job, JobSpec, NodeState
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
    """The gang's size and optional shape: ``gpus_per_node`` GPUs on each of ``nodes`` nodes
    (0: any). :meth:`per_node` resolves what can be resolved."""

    gpus: int
    gpus_per_node: int = 0
    nodes: int = 0

    def per_node(self) -> tuple[int, int] | None:
        """``(GPUs per node, node count)`` for a fixed shape, None for any shape. Raises
        ValueError where the shape cannot hold exactly ``gpus`` GPUs."""
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


def choose(shape: Shape, free: Iterable[FreeNode]) -> Spread | None:
    """The best placement of ``shape`` over ``free`` (see the module doc), or None where it
    does not fit. Deterministic: ties go to the fewest free GPUs used up, then to names."""
    if shape.gpus < 1:
        raise ValueError(f"a gang needs at least 1 GPU, got {shape.gpus}")
    fixed = shape.per_node()
    by_kind: dict[str, list[FreeNode]] = {}
    for node in free:
        if node.free:
            by_kind.setdefault(node.kind, []).append(node)
    plans = [_plan(shape.gpus, fixed, nodes) for nodes in by_kind.values()]
    found = [p for p in plans if p is not None]
    return min(found, key=_rank)[1] if found else None


_Plan = tuple[tuple[int, int, int, tuple[str, ...]], Spread]


def _rank(plan: _Plan) -> tuple[int, int, int, tuple[str, ...]]:
    return plan[0]


def _plan(need: int, fixed: tuple[int, int] | None, nodes: list[FreeNode]) -> _Plan | None:
    """The best plan on nodes of one kind: one rack if any rack holds it, else fewest racks."""
    racks: dict[str, list[FreeNode]] = {}
    for node in nodes:
        racks.setdefault(node.rack, []).append(node)
    inside = [p for p in (_take(need, fixed, members) for members in racks.values()) if p is not None]
    if inside:
        return min(inside, key=_rank)
    return _across(need, fixed, racks)


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


def describe(shape: Shape, free: Iterable[FreeNode]) -> str:
    """Why ``shape`` does not fit: the reason a waiting gang shows."""
    nodes = [n for n in free if n.free]
    total = sum(len(n.free) for n in nodes)
    largest = max((len(n.free) for n in nodes), default=0)
    fixed = shape.per_node()
    if fixed == (shape.gpus, 1):
        return f"needs {shape.gpus} free GPU(s) on one node, largest free set is {largest}"
    if fixed is not None:
        per, count = fixed
        have = sum(1 for n in nodes if len(n.free) >= per)
        return f"needs {count} node(s) with {per} free GPU(s) each, {have} have that many"
    return f"needs {shape.gpus} free GPU(s), {total} free on {len(nodes)} node(s) (largest set {largest})"


def shape_of(spec: JobSpec, largest: int) -> Shape:
    """The shape to place: the spec's own where it spans nodes (see :func:`spans`), else one
    node (a job that fits on one node waits for one rather than pay for crossing nodes)."""
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


def spans(snapshot: ClusterSnapshot, job: Job) -> bool:
    """Whether a pending job must be spread over nodes: its shape asks for more than one node,
    or it is larger than every READY node."""
    return spec_spans(job.spec, largest_node(snapshot))


def spec_spans(spec: JobSpec, largest: int) -> bool:
    """:func:`spans` from the spec and the size of the largest node (0: no ready GPU: never)."""
    if largest == 0:
        return False
    return spec.nodes > 1 or 0 < spec.gpus_per_node < spec.gpus or spec.gpus > largest


def largest_node(snapshot: ClusterSnapshot) -> int:
    """The most healthy GPUs on one READY node."""
    ready = (n for n in snapshot.nodes if n.state is NodeState.READY)
    return max((sum(g.healthy for g in n.gpus) for n in ready), default=0)


def place(shape: Shape, free: Sequence[FreeNode]) -> Spread | str:
    """:func:`choose`, or the reason the gang waits (a shape that cannot hold it included)."""
    try:
        plan = choose(shape, free)
    except ValueError as exc:
        return f"gang shape: {exc}"
    return plan if plan is not None else describe(shape, free)
