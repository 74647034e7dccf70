"""The ready GPUs of a snapshot as the kernel numbers them, cached across passes, and masked.

Per node the healthy GPUs in index order and their kinds are kept while its GPU tuple stays the
same; the layout is reused while the nodes' entries are the same, else concatenated anew.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Gpu, Node, NodeState, gpu_type_of

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
Ix = NDArray[np.intp]
Kind = tuple[str, int]  # (GPU type, memory MiB)
_INDEX = operator.attrgetter("index")
_NAME, _UUIDS, _KINDS = (
    operator.attrgetter("name"),
    operator.attrgetter("uuids"),
    operator.attrgetter("kinds"),
)


def gpu_type(gpu: Gpu) -> str:
    return gpu.gpu_type or gpu_type_of(gpu.model)


@dataclass(frozen=True, eq=False)
class _NodeEntry:
    name: str
    gpus: tuple[Gpu, ...]  # the node's GPU tuple this entry was built from
    uuids: tuple[str, ...]  # healthy GPUs in index order
    kinds: tuple[Kind, ...]

    @staticmethod
    def of(node: Node) -> _NodeEntry:
        ordered = sorted([g for g in node.gpus if g.healthy], key=_INDEX)
        return _NodeEntry(
            node.name,
            node.gpus,
            tuple([g.uuid for g in ordered]),
            tuple([(g.gpu_type or gpu_type_of(g.model), g.memory_mib) for g in ordered]),
        )


@dataclass(frozen=True, eq=False)
class ClusterLayout:
    """Ready nodes' healthy GPUs, numbered node by node (what ``Problem.node_start`` says).

    A layout :meth:`masked` to hide some GPUs keeps the one it masks (``base``) and where each of
    its GPUs went (``to_view``, -1: hidden), so what is kept per GPU of the base reads through."""

    entries: tuple[_NodeEntry, ...]
    node_names: tuple[str, ...]
    gpu_uuids: list[str]
    node_start: I32
    gpu_kind: I32
    kinds: tuple[Kind, ...]  # in order of first appearance
    kind_cap: I64
    largest_node: int
    base: ClusterLayout | None = None  # the layout this one masks (None: none)
    to_view: Ix | None = None  # per GPU of ``base``: its index here, -1 where hidden

    @staticmethod
    def of(entries: Sequence[_NodeEntry]) -> ClusterLayout:
        sizes = list(map(len, map(_UUIDS, entries)))
        kinds: dict[Kind, int] = {}
        codes: dict[tuple[Kind, ...], list[int]] = {}  # a node's kinds -> their codes (few distinct)
        for per in map(_KINDS, entries):
            if per not in codes:
                codes[per] = [kinds.setdefault(k, len(kinds)) for k in per]
        gpu_kind = np.fromiter(chain.from_iterable(map(codes.__getitem__, map(_KINDS, entries))), np.int32)
        return ClusterLayout(
            entries=tuple(entries),
            node_names=tuple(map(_NAME, entries)),
            gpu_uuids=list(chain.from_iterable(map(_UUIDS, entries))),
            node_start=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int32),
            gpu_kind=gpu_kind,
            kinds=tuple(kinds),
            kind_cap=np.array([mib for _, mib in kinds], np.int64),
            largest_node=max(sizes, default=0),
        )

    def masked(self, hidden: NDArray[np.bool_]) -> ClusterLayout:
        """This layout without the GPUs ``hidden`` marks (one flag per GPU): what a snapshot with
        those GPUs unhealthy lays out (the same nodes; kinds in order of first appearance)."""
        keep = np.flatnonzero(~hidden)
        counts = np.diff(np.concatenate([[0], np.cumsum(~hidden, dtype=np.int64)])[self.node_start])
        first = np.unique(self.gpu_kind[keep], return_index=True)
        order = first[0][np.argsort(first[1], kind="stable")]  # the kinds kept, by first appearance
        recode = np.full(len(self.kinds), -1, np.int32)
        recode[order] = np.arange(len(order), dtype=np.int32)
        to_view = np.full(len(hidden), -1, np.intp)
        to_view[keep] = np.arange(len(keep))
        kinds = tuple(self.kinds[k] for k in order.tolist())
        return ClusterLayout(
            entries=(),
            node_names=self.node_names,
            gpu_uuids=[self.gpu_uuids[i] for i in keep.tolist()],
            node_start=np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
            gpu_kind=recode[self.gpu_kind[keep]],
            kinds=kinds,
            kind_cap=np.array([mib for _, mib in kinds], np.int64),
            largest_node=int(counts.max(initial=0)),
            base=self,
            to_view=to_view,
        )

    @property
    def n_gpus(self) -> int:
        return len(self.gpu_uuids)

    @cached_property
    def index(self) -> dict[str, int]:
        return dict(zip(self.gpu_uuids, range(len(self.gpu_uuids)), strict=True))

    @cached_property
    def singles(self) -> list[tuple[str]]:
        """``(uuid,)`` per GPU: the GPUs of a 1-GPU Assign."""
        return list(zip(self.gpu_uuids))  # (zip of one sequence: 1-tuples)

    @cached_property
    def types(self) -> list[str]:
        """The type of each GPU, in layout order."""
        kinds = [t for t, _ in self.kinds]
        return [kinds[k] for k in self.gpu_kind.tolist()]

    @cached_property
    def present(self) -> frozenset[str]:
        """The types of its GPUs."""
        return frozenset(t for t, _ in self.kinds)

    def not_of(self, types: frozenset[str]) -> NDArray[np.bool_]:
        """Per GPU: whether its type is not one of ``types``."""
        kinds = [k for k, (t, _) in enumerate(self.kinds) if t in types]
        out: NDArray[np.bool_] = ~np.isin(self.gpu_kind, kinds)
        return out

    @cached_property
    def main_type(self) -> str:
        """The most common type among the GPUs (the first seen of those tied; "v100" for none)."""
        counts = Counter(self.types)
        return counts.most_common(1)[0][0] if counts else "v100"


class NodeCache:
    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] = ()
        self._layout = ClusterLayout.of(())
        self._per: dict[str, _NodeEntry] = {}
        self._types: dict[str, str] | None = None

    def types(self, nodes: tuple[Node, ...]) -> dict[str, str]:
        """GPU uuid -> type on every node (ready or not), kept with the layout."""
        self.layout(nodes)
        if self._types is None:
            self._types = {g.uuid: gpu_type(g) for n in nodes for g in n.gpus}
        return self._types

    def layout(self, nodes: tuple[Node, ...]) -> ClusterLayout:
        if nodes is self._nodes or (
            len(nodes) == len(self._nodes) and all(map(operator.is_, nodes, self._nodes))
        ):
            return self._layout
        self._types = None
        entries = [self._entry(n) for n in nodes if n.state is NodeState.READY]
        old = self._layout.entries
        if len(entries) != len(old) or not all(map(operator.is_, entries, old)):
            self._layout = ClusterLayout.of(entries)
        self._nodes = nodes
        if len(self._per) > 2 * len(nodes) + 64:
            names = {n.name for n in nodes}
            self._per = {k: v for k, v in self._per.items() if k in names}
        return self._layout

    def _entry(self, node: Node) -> _NodeEntry:
        e = self._per.get(node.name)
        if e is None or not (e.gpus is node.gpus or e.gpus == node.gpus):
            e = self._per[node.name] = _NodeEntry.of(node)
        return e
