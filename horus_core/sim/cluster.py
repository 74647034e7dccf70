"""Simulated clusters from a short spec: ``v100:64`` or ``k80:32,p100:32,v100:32``.

Each GPU type gets its own nodes of ``gpus_per_node`` GPUs (the last node of a type may be
smaller). Node names are ``<type>-<n>`` (``v100-000``), GPU uuids ``GPU-<node>-<index>``, so the
names sort in cluster order and a run is reproducible.
"""

from __future__ import annotations

import re

from horus_core.errors import InvalidArgument
from horus_core.interference.profiles import GPU_TYPE_MEMORY_MIB
from horus_core.model import Gpu, Node

# Memory of one GPU of each family the throughput table measures, as NVML reports it (MiB): the
# 12 GB K80 (one die) shows 11,441, the 16 GB P100 16,280, the 16 GB V100 16,160. The interference
# model uses the same figures, so the packing kernel (which reads Gpu.memory_mib) and the speeds
# the model gives (which say 0 where a set of jobs does not fit) agree on what fits.
GPU_MEMORY_MIB: dict[str, int] = {t: GPU_TYPE_MEMORY_MIB[t] for t in ("k80", "p100", "v100")}
GPU_MODELS: dict[str, str] = {
    "k80": "Tesla K80",
    "p100": "Tesla P100-PCIE-16GB",
    "v100": "Tesla V100-SXM2-16GB",
}
DEFAULT_GPUS_PER_NODE = 8
MAX_GPUS = 1_000_000
_PART = re.compile(r"^\s*([A-Za-z0-9_]+)\s*:\s*(\d+)\s*$")


def parse_cluster_spec(spec: str) -> list[tuple[str, int]]:
    """``"k80:32,v100:16"`` -> ``[("k80", 32), ("v100", 16)]``; raises InvalidArgument on bad input."""
    parts = [p for p in spec.split(",") if p.strip()]
    if not parts:
        raise InvalidArgument("cluster", f"empty cluster spec {spec!r}; expected e.g. v100:64")
    out: list[tuple[str, int]] = []
    for part in parts:
        match = _PART.match(part)
        if match is None:
            raise InvalidArgument(
                "cluster", f"bad cluster spec part {part.strip()!r}; expected TYPE:COUNT, e.g. v100:64"
            )
        gpu_type, count = match.group(1).lower(), int(match.group(2))
        if gpu_type not in GPU_MEMORY_MIB:
            known = ", ".join(sorted(GPU_MEMORY_MIB))
            raise InvalidArgument("cluster", f"unknown GPU type {gpu_type!r}; known types: {known}")
        if not 1 <= count <= MAX_GPUS:
            raise InvalidArgument("cluster", f"GPU count for {gpu_type} must be 1..{MAX_GPUS}, got {count}")
        if any(t == gpu_type for t, _ in out):
            raise InvalidArgument("cluster", f"GPU type {gpu_type!r} given twice")
        out.append((gpu_type, count))
    return out


def build_cluster(spec: str, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> tuple[Node, ...]:
    """The READY nodes of a cluster spec, in a deterministic order."""
    if gpus_per_node < 1:
        raise InvalidArgument("gpus_per_node", f"must be at least 1, got {gpus_per_node}")
    nodes: list[Node] = []
    for gpu_type, count in parse_cluster_spec(spec):
        for start in range(0, count, gpus_per_node):
            name = f"{gpu_type}-{start // gpus_per_node:03d}"
            size = min(gpus_per_node, count - start)
            nodes.append(Node(name=name, gpus=tuple(_gpu(name, i, gpu_type) for i in range(size))))
    return tuple(nodes)


def _gpu(node: str, index: int, gpu_type: str) -> Gpu:
    return Gpu(
        uuid=f"GPU-{node}-{index}",
        node=node,
        index=index,
        model=GPU_MODELS[gpu_type],
        memory_mib=GPU_MEMORY_MIB[gpu_type],
        gpu_type=gpu_type,
    )
