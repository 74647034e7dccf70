"""The ready GPUs of a snapshot as the kernel numbers them, cached across passes.

Per node (by name) the healthy GPUs in index order and their kinds are kept while the node's
GPU tuple stays the same (identity, else equality); the whole layout is reused while the
snapshot's node tuple holds the same node objects, or nodes whose cached entries are the same.
A node that is lost, drained, back, or whose GPUs change rebuilds the layout from the cached
per-node pieces (no per-GPU work for the others but a concatenation).
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
    """Ready nodes' healthy GPUs, numbered node by node (what ``Problem.node_start`` says)."""

    entries: tuple[_NodeEntry, ...]
    node_names: tuple[str, ...]
    gpu_uuids: list[str]
    node_start: I32
    gpu_kind: I32
    kinds: tuple[Kind, ...]  # in order of first appearance
    kind_cap: I64
    largest_node: int

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
    def main_type(self) -> str:
        """The most common type among the ready healthy GPUs ("v100" when there are none)."""
        types = Counter(gpu_type(g) for e in self.entries for g in e.gpus if g.healthy)
        return types.most_common(1)[0][0] if types else "v100"


class NodeCache:
    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] = ()
        self._layout = ClusterLayout.of(())
        self._per: dict[str, _NodeEntry] = {}

    def layout(self, nodes: tuple[Node, ...]) -> ClusterLayout:
        if nodes is self._nodes or (
            len(nodes) == len(self._nodes) and all(map(operator.is_, nodes, self._nodes))
        ):
            return self._layout
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
