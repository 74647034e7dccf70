"""Simulated clusters from a short spec: ``v100:64``, ``k80:32,p100:32,v100:32``, ``v100:64/8/32``.

Each part is ``TYPE:COUNT[/PER_NODE[/PER_RACK]]``. Each GPU type gets its own nodes of
``PER_NODE`` GPUs (default ``gpus_per_node``; the last node of a type may be smaller). With
``PER_RACK`` (a multiple of ``PER_NODE``) consecutive nodes are grouped into racks of that many
GPUs, named ``<type>-r<k>`` (``v100-r0``); without it nodes have no rack (``Node.rack == ""``).
Node names are ``<type>-<n>`` (``v100-000``), GPU uuids ``GPU-<node>-<index>``, so the names
sort in cluster order and a run is reproducible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from horus_core.errors import InvalidArgument
from horus_core.interference.profiles import GPU_TYPE_MEMORY_MIB
from horus_core.model import Gpu, Node

# Memory of one GPU of each family, as NVML reports it (MiB): the 12 GB K80 (one die) shows 11,441,
# the 16 GB P100 16,280, the 16 GB V100 16,160 (the packaged table's three); the newer families
# of interference/gpus.py are there for tables of one's own (--throughputs). The interference
# model uses the same figures, so the packing kernel (which reads Gpu.memory_mib) and the speeds
# the model gives (which say 0 where a set of jobs does not fit) agree on what fits.
GPU_MEMORY_MIB: dict[str, int] = dict(GPU_TYPE_MEMORY_MIB)
GPU_MODELS: dict[str, str] = {
    "k80": "Tesla K80",
    "p100": "Tesla P100-PCIE-16GB",
    "v100": "Tesla V100-SXM2-16GB",
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "a100": "NVIDIA A100-SXM4-40GB",
}
DEFAULT_GPUS_PER_NODE = 8
MAX_GPUS = 1_000_000
_PART = re.compile(r"^\s*([A-Za-z0-9_]+)\s*:\s*(\d+)\s*(?:/\s*(\d+)\s*(?:/\s*(\d+)\s*)?)?$")


@dataclass(frozen=True, slots=True)
class Part:
    """One GPU type of a cluster spec: how many, per node (0: the default), per rack (0: none)."""

    gpu_type: str
    count: int
    per_node: int = 0
    per_rack: int = 0


def parse_cluster_spec(spec: str) -> list[tuple[str, int]]:
    """``"k80:32,v100:16"`` -> ``[("k80", 32), ("v100", 16)]``; raises InvalidArgument on bad input."""
    return [(p.gpu_type, p.count) for p in parse_cluster_parts(spec)]


def parse_cluster_parts(spec: str) -> list[Part]:
    """Every part of a spec with its node and rack sizes; raises InvalidArgument on bad input."""
    parts = [p for p in spec.split(",") if p.strip()]
    if not parts:
        raise InvalidArgument("cluster", f"empty cluster spec {spec!r}; expected e.g. v100:64")
    out: list[Part] = []
    for part in parts:
        match = _PART.match(part)
        if match is None:
            raise InvalidArgument(
                "cluster",
                f"bad cluster spec part {part.strip()!r}; expected TYPE:COUNT[/PER_NODE[/PER_RACK]], "
                "e.g. v100:64 or v100:64/8/32",
            )
        gpu_type, count = match.group(1).lower(), int(match.group(2))
        per_node, per_rack = int(match.group(3) or 0), int(match.group(4) or 0)
        if gpu_type not in GPU_MEMORY_MIB:
            known = ", ".join(sorted(GPU_MEMORY_MIB))
            raise InvalidArgument("cluster", f"unknown GPU type {gpu_type!r}; known types: {known}")
        if not 1 <= count <= MAX_GPUS:
            raise InvalidArgument("cluster", f"GPU count for {gpu_type} must be 1..{MAX_GPUS}, got {count}")
        if any(p.gpu_type == gpu_type for p in out):
            raise InvalidArgument("cluster", f"GPU type {gpu_type!r} given twice")
        _check_sizes(gpu_type, per_node, per_rack, match.group(3) is not None)
        out.append(Part(gpu_type, count, per_node, per_rack))
    return out


def _check_sizes(gpu_type: str, per_node: int, per_rack: int, given: bool) -> None:
    if given and per_node < 1:
        raise InvalidArgument("cluster", f"GPUs per node for {gpu_type} must be at least 1, got {per_node}")
    if per_rack and per_rack % per_node:
        raise InvalidArgument(
            "cluster",
            f"GPUs per rack for {gpu_type} ({per_rack}) must be a multiple of GPUs per node ({per_node})",
        )


def build_cluster(spec: str, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> tuple[Node, ...]:
    """The READY nodes of a cluster spec, in a deterministic order."""
    if gpus_per_node < 1:
        raise InvalidArgument("gpus_per_node", f"must be at least 1, got {gpus_per_node}")
    nodes: list[Node] = []
    for part in parse_cluster_parts(spec):
        gpu_type, count = part.gpu_type, part.count
        per = part.per_node or gpus_per_node
        for start in range(0, count, per):
            name = f"{gpu_type}-{start // per:03d}"
            size = min(per, count - start)
            rack = f"{gpu_type}-r{start // part.per_rack}" if part.per_rack else ""
            nodes.append(Node(name=name, gpus=tuple(_gpu(name, i, gpu_type) for i in range(size)), rack=rack))
    return tuple(nodes)


def _gpu(node: str, index: int, gpu_type: str) -> Gpu:
    return Gpu(
        uuid=f"GPU-{node}-{index}",
        node=node,
        index=index,
        model=GPU_MODELS.get(gpu_type, gpu_type.upper()),
        memory_mib=GPU_MEMORY_MIB[gpu_type],
        gpu_type=gpu_type,
    )
