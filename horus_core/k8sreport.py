"""The node report a ``horus-worker --kubernetes`` agent writes for the ``horus-k8s`` scheduler:
its model, its JSON form (schema version 1) and the validation of that form.

One report per node lives in the ConfigMap ``horus-node-<node>`` (data key ``report.json``) of the
Horus namespace; the agent rewrites it every ``interval_s`` seconds and the scheduler treats a
report older than three intervals as stale. The reader is the scheduler, which must never die on
what a node wrote: :func:`parse_report` checks every field (types, finite numbers, bounded sizes
and counts, GPUs a pod names are the node's) and raises a ``ValueError`` naming the field.
:func:`render_report` applies the same checks, so the agent cannot write what the scheduler would
refuse. Keys this version does not know are ignored (a later agent may add some). Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VERSION = 1
DATA_KEY = "report.json"
CONFIGMAP_PREFIX = "horus-node-"
LABEL_PART_OF = ("app.kubernetes.io/part-of", "horus")
LABEL_NODE_REPORT = ("horus.io/node-report", "true")
STALE_INTERVALS = 3.0

EVENT_OVER_CAP = "over_cap"  # the agent's watchdog saw the pod above its cap and evicted it
EVENT_OOM = "oom"  # a container of the pod ended out of GPU memory
EVENT_KINDS = frozenset({EVENT_OVER_CAP, EVENT_OOM})

MAX_REPORT_BYTES = 900 * 1024  # a ConfigMap holds at most 1 MiB in all
MAX_GPUS = 128  # per node (MIG instances count one each)
MAX_PODS = 1024
MAX_EVENTS = 256
MAX_NAME = 253  # a DNS subdomain: node and pod names
MAX_NAMESPACE = 63
MAX_UID = 128
MAX_UUID = 128
MAX_GPU_NAME = 256
MAX_DETAIL = 1024
MAX_MIB = 1 << 24  # 16 TiB: far above any GPU
MAX_INTERVAL_S = 3600.0
MAX_STEP = 1 << 62


@dataclass(frozen=True, slots=True)
class GpuReadingK8s:
    """One GPU of the node as NVML (or the simulated probe) reads it."""

    uuid: str
    index: int
    name: str = ""
    util: float = 0.0  # SM utilisation, %
    mem_used_mib: int = 0
    mem_total_mib: int = 0


@dataclass(frozen=True, slots=True)
class PodReading:
    """What one pod uses on the node's GPUs, and the progress its job reported."""

    uid: str
    namespace: str
    name: str
    gpus: tuple[str, ...] = ()  # the UUIDs its processes were seen on
    util: float = 0.0  # its processes' SM utilisation, %, averaged over its GPUs
    mem_used_mib: int = 0  # its processes' GPU memory on the GPU where it uses most
    samples_per_s: float | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class PodEvent:
    """Something the agent saw happen to a pod's GPU memory (``kind`` in :data:`EVENT_KINDS`)."""

    uid: str
    kind: str
    time: float
    gpu: str = ""  # the GPU's UUID, "" when unknown
    mem_used_mib: int = 0
    cap_mib: int = 0  # 0: no cap known
    detail: str = ""
    # For OOM containment (horus_core.containment.Ending): whether another pod shared one of its
    # GPUs while it ran, and whether such a neighbour was seen above its own cap meanwhile.
    shared: bool = False
    neighbour_over_cap: bool = False


@dataclass(frozen=True, slots=True)
class NodeReport:
    """A node's report: its GPUs, its pods' readings and the memory events since the agent started."""

    node: str
    time: float  # when it was written, seconds since the epoch
    interval_s: float
    gpus: tuple[GpuReadingK8s, ...] = ()
    pods: tuple[PodReading, ...] = ()
    events: tuple[PodEvent, ...] = ()
    version: int = VERSION


def configmap_name(node: str) -> str:
    """The ConfigMap that holds ``node``'s report; ``ValueError`` if the name would be too long."""
    _text("node", node, MAX_NAME)
    name = CONFIGMAP_PREFIX + node
    if len(name) > MAX_NAME:
        raise ValueError(
            f"node: {node[:40]!r}... is too long for a ConfigMap name ({len(name)} > {MAX_NAME})"
        )
    return name


def is_stale(report: NodeReport, now: float) -> bool:
    """Whether the report is older than :data:`STALE_INTERVALS` of its own interval."""
    return now - report.time > STALE_INTERVALS * report.interval_s


def parse_report(text: str) -> NodeReport:
    """The report in ``text`` (the ConfigMap's ``report.json``), checked; ``ValueError`` names the field."""
    if len(text) > MAX_REPORT_BYTES:
        raise ValueError(f"report: {len(text)} characters, at most {MAX_REPORT_BYTES}")
    try:
        raw = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"report: not valid JSON ({exc})") from None
    return report_from_dict(raw)


def render_report(report: NodeReport) -> str:
    """The JSON form of ``report``; ``ValueError`` where :func:`parse_report` would refuse it."""
    doc = report_to_dict(report)
    if report_from_dict(doc) != report:
        raise ValueError("report: a field holds a value of the wrong type (a list for a tuple?)")
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    if len(text) > MAX_REPORT_BYTES:
        raise ValueError(f"report: {len(text)} characters, at most {MAX_REPORT_BYTES}")
    return text


def report_to_dict(report: NodeReport) -> dict[str, Any]:
    return {
        "version": report.version,
        "node": report.node,
        "time": report.time,
        "interval_s": report.interval_s,
        "gpus": [_gpu_dict(g) for g in report.gpus],
        "pods": [_pod_dict(p) for p in report.pods],
        "events": [_event_dict(e) for e in report.events],
    }


def report_from_dict(raw: object) -> NodeReport:
    """The report in a decoded JSON value, checked as :func:`parse_report` does."""
    doc = _obj("report", raw)
    version = _int("version", doc.get("version"), 1, 1 << 30)
    if version != VERSION:
        raise ValueError(f"version: {version} is not supported (this reader knows {VERSION})")
    gpus = tuple(_gpu(f"gpus[{i}]", g) for i, g in enumerate(_list("gpus", doc.get("gpus", []), MAX_GPUS)))
    _unique("gpus", [g.uuid for g in gpus], "uuid")
    known = {g.uuid for g in gpus}
    pods = tuple(
        _pod(f"pods[{i}]", p, known) for i, p in enumerate(_list("pods", doc.get("pods", []), MAX_PODS))
    )
    _unique("pods", [p.uid for p in pods], "uid")
    events = tuple(
        _event(f"events[{i}]", e) for i, e in enumerate(_list("events", doc.get("events", []), MAX_EVENTS))
    )
    return NodeReport(
        node=_text("node", doc.get("node"), MAX_NAME),
        time=_float("time", doc.get("time"), 0.0, 1e11),
        interval_s=_float("interval_s", doc.get("interval_s"), 1e-3, MAX_INTERVAL_S),
        gpus=gpus,
        pods=pods,
        events=events,
        version=version,
    )


def _gpu_dict(g: GpuReadingK8s) -> dict[str, Any]:
    return {
        "uuid": g.uuid,
        "index": g.index,
        "name": g.name,
        "util": g.util,
        "mem_used_mib": g.mem_used_mib,
        "mem_total_mib": g.mem_total_mib,
    }


def _pod_dict(p: PodReading) -> dict[str, Any]:
    return {
        "uid": p.uid,
        "namespace": p.namespace,
        "name": p.name,
        "gpus": list(p.gpus),
        "util": p.util,
        "mem_used_mib": p.mem_used_mib,
        "samples_per_s": p.samples_per_s,
        "step": p.step,
    }


def _event_dict(e: PodEvent) -> dict[str, Any]:
    return {
        "uid": e.uid,
        "kind": e.kind,
        "time": e.time,
        "gpu": e.gpu,
        "mem_used_mib": e.mem_used_mib,
        "cap_mib": e.cap_mib,
        "detail": e.detail,
        "shared": e.shared,
        "neighbour_over_cap": e.neighbour_over_cap,
    }


def _gpu(field: str, raw: object) -> GpuReadingK8s:
    d = _obj(field, raw)
    return GpuReadingK8s(
        uuid=_text(f"{field}.uuid", d.get("uuid"), MAX_UUID),
        index=_int(f"{field}.index", d.get("index"), 0, MAX_GPUS * 64),
        name=_text(f"{field}.name", d.get("name", ""), MAX_GPU_NAME, empty=True),
        util=_float(f"{field}.util", d.get("util", 0.0), 0.0, 100.0),
        mem_used_mib=_int(f"{field}.mem_used_mib", d.get("mem_used_mib", 0), 0, MAX_MIB),
        mem_total_mib=_int(f"{field}.mem_total_mib", d.get("mem_total_mib", 0), 0, MAX_MIB),
    )


def _pod(field: str, raw: object, known: set[str]) -> PodReading:
    d = _obj(field, raw)
    gpus = tuple(
        _text(f"{field}.gpus[{i}]", u, MAX_UUID)
        for i, u in enumerate(_list(f"{field}.gpus", d.get("gpus", []), MAX_GPUS))
    )
    _unique(f"{field}.gpus", list(gpus), "uuid")
    for i, uuid in enumerate(gpus):
        if uuid not in known:
            raise ValueError(f"{field}.gpus[{i}]: {uuid[:64]!r} is not one of the node's gpus")
    samples, step = d.get("samples_per_s"), d.get("step")
    return PodReading(
        uid=_text(f"{field}.uid", d.get("uid"), MAX_UID),
        namespace=_text(f"{field}.namespace", d.get("namespace"), MAX_NAMESPACE),
        name=_text(f"{field}.name", d.get("name"), MAX_NAME),
        gpus=gpus,
        util=_float(f"{field}.util", d.get("util", 0.0), 0.0, 100.0),
        mem_used_mib=_int(f"{field}.mem_used_mib", d.get("mem_used_mib", 0), 0, MAX_MIB),
        samples_per_s=None if samples is None else _float(f"{field}.samples_per_s", samples, 0.0, 1e12),
        step=None if step is None else _int(f"{field}.step", step, 0, MAX_STEP),
    )


def _event(field: str, raw: object) -> PodEvent:
    d = _obj(field, raw)
    kind = _text(f"{field}.kind", d.get("kind"), 32)
    if kind not in EVENT_KINDS:
        raise ValueError(f"{field}.kind: {kind!r} is not one of {sorted(EVENT_KINDS)}")
    return PodEvent(
        uid=_text(f"{field}.uid", d.get("uid"), MAX_UID),
        kind=kind,
        time=_float(f"{field}.time", d.get("time"), 0.0, 1e11),
        gpu=_text(f"{field}.gpu", d.get("gpu", ""), MAX_UUID, empty=True),
        mem_used_mib=_int(f"{field}.mem_used_mib", d.get("mem_used_mib", 0), 0, MAX_MIB),
        cap_mib=_int(f"{field}.cap_mib", d.get("cap_mib", 0), 0, MAX_MIB),
        detail=_text(f"{field}.detail", d.get("detail", ""), MAX_DETAIL, empty=True),
        shared=_bool(f"{field}.shared", d.get("shared", False)),
        neighbour_over_cap=_bool(f"{field}.neighbour_over_cap", d.get("neighbour_over_cap", False)),
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _obj(field: str, raw: object) -> Mapping[str, object]:
    if not isinstance(raw, dict):
        raise ValueError(f"{field}: expected an object, got {type(raw).__name__}")
    return raw


def _list(field: str, raw: object, limit: int) -> list[object]:
    if not isinstance(raw, list):
        raise ValueError(f"{field}: expected a list, got {type(raw).__name__}")
    if len(raw) > limit:
        raise ValueError(f"{field}: {len(raw)} entries, at most {limit}")
    return raw


def _text(field: str, raw: object, limit: int, *, empty: bool = False) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"{field}: expected a string, got {type(raw).__name__}")
    if not raw and not empty:
        raise ValueError(f"{field}: must not be empty")
    if len(raw) > limit:
        raise ValueError(f"{field}: {len(raw)} characters, at most {limit}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise ValueError(f"{field}: holds a control character")
    return raw


def _int(field: str, raw: object, lo: int, hi: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{field}: expected an integer, got {type(raw).__name__}")
    if not lo <= raw <= hi:
        raise ValueError(f"{field}: {raw} is outside [{lo}, {hi}]")
    return raw


def _bool(field: str, raw: object) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"{field}: expected true or false, got {type(raw).__name__}")
    return raw


def _float(field: str, raw: object, lo: float, hi: float) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"{field}: expected a number, got {type(raw).__name__}")
    try:
        value = float(raw)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or not lo <= value <= hi:
        raise ValueError(f"{field}: {raw} is not a finite number in [{lo:g}, {hi:g}]")
    return value


def _unique(field: str, keys: list[str], what: str) -> None:
    seen: set[str] = set()
    for i, key in enumerate(keys):
        if key in seen:
            raise ValueError(f"{field}[{i}].{what}: {key[:64]!r} appears twice")
        seen.add(key)
