"""A Kubernetes node as a Horus node: its GPUs from ``status.allocatable["nvidia.com/gpu"]``, their
model and memory from GPU feature discovery's labels (``nvidia.com/gpu.product``,
``nvidia.com/gpu.memory`` in MiB, ``nvidia.com/gpu.count``), or from HAMi's node registration
(``hami.io/node-nvidia-register``: the GPUs' real UUIDs, memory and health) where HAMi's device
plugin wrote one. A cordoned node (``spec.unschedulable``) is CORDONED, a node whose Ready
condition is not True (or that carries the not-ready / unreachable taint) is LOST: neither
takes new work. A GPU's UUID is ``NODE/INDEX`` without HAMi (what ``horus.io/gpus`` names is
the index)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from horus_core.k8s.quantity import parse_count, parse_quantity
from horus_core.model import Gpu, Node, NodeState, gpu_type_of

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"
COUNT = "nvidia.com/gpu.count"
HAMI_REGISTER = "hami.io/node-nvidia-register"
MIG_PREFIX = "nvidia.com/mig-"  # + a profile, "1g.10gb": GFD's mixed strategy, a resource per profile
_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")
_SLICES = 7.0  # compute slices of an A100 / H100 (a 3g instance has 3 of 7)
_NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A node's Horus view, what CPU and memory it offers pods, and its address."""

    node: Node
    cpu: float  # allocatable cores
    memory: float  # allocatable bytes
    address: str  # InternalIP (else the first address; else the name): a gang's MASTER_ADDR
    hami: bool = False  # its GPUs are HAMi's registration (real UUIDs: HAMi's annotations apply)
    why: str = ""  # why it takes no new work ("" = it does)


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    """The node's facts; a value that does not parse counts as absent (a node never fails a pass)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    name = str(meta.get("name") or "")
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    alloc = status.get("allocatable") or {}
    hami = _hami_gpus(name, str(notes.get(HAMI_REGISTER, "")))
    gpus = hami if hami else _gfd_gpus(name, _count(alloc.get(GPU)), labels)
    gpus += _mig_gpus(name, alloc, labels, len(gpus))
    state, why = NodeState.READY, ""
    taints = {str(t.get("key")) for t in spec.get("taints") or [] if isinstance(t, dict)}
    if not _ready(status) or taints & _NOT_READY_TAINTS:
        state, why = NodeState.LOST, f"node {name} is not Ready"
    elif spec.get("unschedulable"):
        state, why = NodeState.CORDONED, f"node {name} is cordoned"
    node = Node(name, gpus, state, rack=str(labels.get("topology.kubernetes.io/zone", "")))
    return NodeFacts(
        node, _amount(alloc.get("cpu")), _amount(alloc.get("memory")), _address(status, name), bool(hami), why
    )


def _count(value: object) -> int:
    try:
        return parse_count(value) if value is not None else 0
    except ValueError:
        return 0


def _amount(value: object) -> float:
    try:
        return parse_quantity(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def _ready(status: Mapping[str, Any]) -> bool:
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _address(status: Mapping[str, Any], name: str) -> str:
    addresses = [a for a in status.get("addresses") or [] if isinstance(a, dict) and a.get("address")]
    for a in addresses:
        if a.get("type") == "InternalIP":
            return str(a["address"])
    return str(addresses[0]["address"]) if addresses else name


def _gfd_gpus(name: str, count: int, labels: Mapping[str, str]) -> tuple[Gpu, ...]:
    product = str(labels.get(PRODUCT, "")) or "NVIDIA GPU"
    memory = _count(labels.get(MEMORY))
    return tuple(Gpu(f"{name}/{i}", name, i, product, memory, gpu_type_of(product)) for i in range(count))


def resource_of(gpu: Gpu) -> str:
    """The extended resource a GPU of :func:`node_facts` is: ``nvidia.com/gpu`` or a MIG profile's."""
    _, sep, rest = gpu.uuid.partition("/mig-")
    return MIG_PREFIX + rest.rsplit("/", 1)[0] if sep else GPU


def _mig_gpus(name: str, alloc: Mapping[str, Any], labels: Mapping[str, str], first: int) -> tuple[Gpu, ...]:
    """GFD's mixed MIG strategy: ``nvidia.com/mig-3g.40gb: N`` instances, each a GPU of its own
    of type ``<family>-3g.40gb`` (as a Horus worker reports MIG instances: docs/sharing.md)."""
    out: list[Gpu] = []
    product = str(labels.get(PRODUCT, "")) or "NVIDIA GPU"
    for key in sorted(k for k in alloc if _MIG.match(str(k))):
        m = _MIG.match(str(key))
        assert m is not None
        profile = f"{m.group(1)}g.{m.group(2)}gb"
        model = f"{product} MIG {profile}"
        for i in range(_count(alloc.get(key))):
            uuid = f"{name}/mig-{profile}/{i}"
            fraction = min(1.0, int(m.group(1)) / _SLICES)
            gpu = Gpu(uuid, name, first + len(out), model, int(m.group(2)) * 1024, gpu_type_of(model))
            out.append(dataclasses.replace(gpu, compute_fraction=fraction))
    return tuple(out)


def _hami_gpus(name: str, register: str) -> tuple[Gpu, ...]:
    """HAMi's registration: ``UUID,split,memMiB,cores,type,numa,healthy:`` per GPU."""
    out: list[Gpu] = []
    for i, entry in enumerate(e for e in register.split(":") if e.strip()):
        parts = entry.split(",")
        if len(parts) < 5:
            return ()  # (not the documented form: GFD's labels instead)
        try:
            memory = int(parts[2])
        except ValueError:
            return ()
        model = parts[4].replace("NVIDIA-", "NVIDIA ", 1)
        healthy = len(parts) < 7 or parts[6].strip().lower() != "false"
        out.append(Gpu(parts[0].strip(), name, i, model, memory, gpu_type_of(model), healthy))
    return tuple(out)
