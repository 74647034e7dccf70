"""A pod of this node as the node agent needs it, read from the apiserver's JSON (pure): who it is,
its GPU memory cap, and how its containers ended.

The cap, per GPU in MiB, from the first of these the pod carries (docs/kubernetes.md):

1. ``horus.io/exclusive: "true"``: no cap (its GPUs are its own: docs/sharing.md);
2. HAMi's allocation, ``hami.io/vgpu-devices-allocated`` (``UUID,Type,MiB,cores:`` per device,
   ``;`` per container): what horus-k8s (or HAMi's scheduler) bound it with, summed per GPU, the
   largest GPU's sum;
3. ``horus.io/gpu-memory`` (``12GiB``, ``4096``: :func:`horus_core.caps.parse_size`);
4. HAMi's resources in the containers' limits: ``nvidia.com/gpumem`` (MiB) or
   ``nvidia.com/gpumem-percentage`` (of the GPU's memory), summed over the containers;
5. KAI's annotations ``gpu-memory`` (MiB) or ``gpu-fraction`` (of the GPU's memory);

else none: the pod is measured, never evicted for its memory. A bad value is named in
``NodePod.problems`` and the next source is tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_core.caps import MAX_GPU_MEMORY_MIB, parse_size

EXCLUSIVE = "horus.io/exclusive"
GPU_MEMORY = "horus.io/gpu-memory"
GPUS = "horus.io/gpus"
JOB_TYPE = "horus.io/job-type"
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_MEM = "nvidia.com/gpumem"
HAMI_MEM_PCT = "nvidia.com/gpumem-percentage"
KAI_MEMORY = "gpu-memory"
KAI_FRACTION = "gpu-fraction"
CONFIG_HASH = "kubernetes.io/config.hash"  # a static pod's cgroup is named after it
TERMINAL = frozenset({"Succeeded", "Failed"})
_TRUE = frozenset({"true", "1", "yes"})
_MAX_TEXT = 4096  # of one annotation value the agent reads


@dataclass(frozen=True, slots=True)
class Cap:
    """A pod's cap per GPU: ``mib``, or ``fraction`` of the GPU's memory; both 0: none."""

    mib: int = 0
    fraction: float = 0.0
    source: str = ""

    def on(self, gpu_total_mib: int) -> int:
        """The cap in MiB on a GPU of ``gpu_total_mib`` (0: no cap)."""
        if self.mib > 0:
            return self.mib
        return math.ceil(self.fraction * gpu_total_mib) if self.fraction > 0 else 0


@dataclass(frozen=True, slots=True)
class Termination:
    """A container run that ended: which run (the kubelet's ``<n>.log``), how, and its message."""

    container: str
    run: int
    exit_code: int
    message: str


@dataclass(frozen=True, slots=True)
class NodePod:
    uid: str
    namespace: str
    name: str
    phase: str = ""
    deleting: bool = False
    cap: Cap = Cap()
    gpus: tuple[str, ...] = ()  # horus.io/gpus: indices or UUIDs on this node
    job_type: str = ""
    config_hash: str = ""
    ended: tuple[Termination, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL


def node_pod(obj: Mapping[str, Any]) -> NodePod | None:
    """The pod in an apiserver object, or None if it is not one (no uid, name or namespace)."""
    meta = _map(obj.get("metadata"))
    uid, name, ns = meta.get("uid"), meta.get("name"), meta.get("namespace")
    if not (isinstance(uid, str) and isinstance(name, str) and isinstance(ns, str) and uid and name):
        return None
    notes = {str(k): v for k, v in _map(meta.get("annotations")).items() if isinstance(v, str)}
    problems: list[str] = []
    cap = pod_cap(notes, _limits(_map(obj.get("spec"))), problems)
    status = _map(obj.get("status"))
    return NodePod(
        uid=uid,
        namespace=ns,
        name=name,
        phase=str(status.get("phase") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        cap=cap,
        gpus=tuple(g.strip() for g in notes.get(GPUS, "").split(",") if g.strip())[:64],
        job_type=notes.get(JOB_TYPE, "")[:256],
        config_hash=notes.get(CONFIG_HASH, "")[:64],
        ended=terminations(status),
        problems=tuple(problems),
    )


def pod_cap(notes: Mapping[str, str], limits: list[Mapping[str, Any]], problems: list[str]) -> Cap:
    """The pod's cap from its annotations and its containers' limits (the module's order)."""
    if notes.get(EXCLUSIVE, "").strip().lower() in _TRUE:
        return Cap(source=EXCLUSIVE)
    readers: tuple[tuple[str, Callable[[], Cap | None]], ...] = (
        (HAMI_ALLOCATED, lambda: _hami_allocated(notes.get(HAMI_ALLOCATED, ""))),
        (GPU_MEMORY, lambda: Cap(parse_size(notes[GPU_MEMORY][:_MAX_TEXT])) if GPU_MEMORY in notes else None),
        (HAMI_MEM, lambda: _hami_limits(limits)),
        (KAI_MEMORY, lambda: _kai(notes)),
    )
    for source, read in readers:
        try:
            cap = read()
        except ValueError as exc:
            problems.append(f"{source}: {exc}")
            continue
        if cap is not None:
            return Cap(cap.mib, cap.fraction, source)
    return Cap()


def _hami_allocated(text: str) -> Cap | None:
    """``UUID,NVIDIA,3000,30:UUID2,...:;...``: the largest per-GPU sum of MiB."""
    per_gpu: dict[str, int] = {}
    for container in text[:_MAX_TEXT].split(";"):
        for device in container.split(":"):
            if not device.strip():
                continue
            fields = device.split(",")
            if len(fields) < 3:
                raise ValueError(f"device {device[:80]!r} is not UUID,type,MiB,cores")
            per_gpu[fields[0]] = per_gpu.get(fields[0], 0) + _mib(fields[2], f"memory of {fields[0][:64]}")
    top = max(per_gpu.values(), default=0)
    return Cap(top) if top > 0 else None


def _hami_limits(limits: list[Mapping[str, Any]]) -> Cap | None:
    mib = sum(_mib(str(lim[HAMI_MEM]), HAMI_MEM) for lim in limits if HAMI_MEM in lim)
    if mib > 0:
        return Cap(mib)
    pct = sum(_fraction(str(lim[HAMI_MEM_PCT]), HAMI_MEM_PCT, 100.0) for lim in limits if HAMI_MEM_PCT in lim)
    return Cap(fraction=min(1.0, pct / 100.0)) if pct > 0 else None


def _kai(notes: Mapping[str, str]) -> Cap | None:
    if KAI_MEMORY in notes:
        return Cap(_mib(notes[KAI_MEMORY], KAI_MEMORY))
    if KAI_FRACTION in notes:
        return Cap(fraction=_fraction(notes[KAI_FRACTION], KAI_FRACTION, 1.0))
    return None


def _mib(text: str, what: str) -> int:
    try:
        mib = int(text.strip()[:32])
    except ValueError:
        raise ValueError(f"{what}: {text[:40]!r} is not a whole number of MiB") from None
    if not 0 <= mib <= MAX_GPU_MEMORY_MIB:
        raise ValueError(f"{what}: {mib} MiB is out of range")
    return mib


def _fraction(text: str, what: str, top: float) -> float:
    try:
        value = float(text.strip()[:32])
    except ValueError:
        raise ValueError(f"{what}: {text[:40]!r} is not a number") from None
    if not (math.isfinite(value) and 0 < value <= top):
        raise ValueError(f"{what}: {text[:40]!r} is not in (0, {top:g}]")
    return value


def _limits(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return []
    return [_map(_map(_map(c).get("resources")).get("limits")) for c in containers[:64]]


def terminations(status: Mapping[str, Any]) -> tuple[Termination, ...]:
    """The container runs the status shows ended: ``state.terminated`` (run ``restartCount``) and
    ``lastState.terminated`` (the run before it)."""
    out: list[Termination] = []
    statuses = status.get("containerStatuses")
    for cs in statuses[:64] if isinstance(statuses, list) else []:
        cs = _map(cs)
        name, restarts = str(cs.get("name") or ""), cs.get("restartCount")
        runs = restarts if isinstance(restarts, int) and restarts >= 0 else 0
        for which, run in (("state", runs), ("lastState", runs - 1)):
            ended = _map(_map(cs.get(which)).get("terminated"))
            code = ended.get("exitCode")
            if ended and isinstance(code, int) and run >= 0:
                out.append(Termination(name, run, code, str(ended.get("message") or "")[-_MAX_TEXT:]))
    return tuple(out)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
