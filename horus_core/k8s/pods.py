"""A pod as Horus sees it: what it asks for (:class:`PodAsk`, a Horus job spec per pod) from the
fields a user writes, read with Horus's own parsers (sizes, model cards, speed floors, the spec's
validation). Every bad value raises :class:`~horus_core.errors.InvalidArgument` whose ``field``
is the pod's field (``metadata.annotations[horus.io/gpu-memory]``), never a crash.

What is read (docs/kubernetes.md, "What a pod may ask"):

- ``nvidia.com/gpu`` (limits, else requests; containers summed, init containers at most);
- Horus's annotations ``horus.io/job-type``, ``horus.io/model-card`` (the card's JSON inline),
  ``horus.io/gpu-memory`` (``12GiB``), ``horus.io/min-speed`` (0..1 or ``none``),
  ``horus.io/exclusive`` (``true``/``false``);
- HAMi's resources ``nvidia.com/gpumem`` (MiB per GPU), ``nvidia.com/gpumem-percentage`` and
  ``nvidia.com/gpucores`` (per cent of a GPU's memory / compute);
- KAI-Scheduler's annotations ``gpu-fraction`` (a share of one GPU) and ``gpu-memory`` (MiB);
- the node selector ``nvidia.com/gpu.product`` (GPU feature discovery's label) as the GPU type;
- gangs: the labels ``horus.io/gang`` + ``horus.io/gang-size``, or the coscheduling plugin's
  ``scheduling.x-k8s.io/pod-group`` (its PodGroup's ``minMember``);
- the queue: the label ``kueue.x-k8s.io/queue-name``, else the namespace;
- ``priorityClassName`` (a priority class of ``--queues``) and ``spec.priority`` (order).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from horus_core.caps import parse_size
from horus_core.errors import InvalidArgument
from horus_core.k8s.quantity import parse_count, parse_quantity
from horus_core.model import NO_FLOOR, JobSpec, ProfileHints, gpu_type_of
from horus_core.modelcard import ModelCard, parse_card
from horus_core.queues.config import QueueConfig
from horus_core.validation import MAX_GPUS_PER_JOB, MAX_GRACE_S, MAX_PRIORITY, validate_spec

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_MEM = "nvidia.com/gpumem"
HAMI_MEM_PCT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
JOB_TYPE = "horus.io/job-type"
MODEL_CARD = "horus.io/model-card"
GPU_MEMORY = "horus.io/gpu-memory"
MIN_SPEED = "horus.io/min-speed"
EXCLUSIVE = "horus.io/exclusive"
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
GANG = "horus.io/gang"
GANG_SIZE = "horus.io/gang-size"
POD_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRODUCT = "nvidia.com/gpu.product"
# What Horus writes on a pod it places (its plan, written before the Binding: a restarted
# horus-k8s finishes a plan it finds instead of deciding again).
GPUS = "horus.io/gpus"
NODE = "horus.io/node"
SPEED = "horus.io/predicted-speed"
RANK = "horus.io/rank"  # a gang pod's node rank

_TRUE, _FALSE = {"true", "yes", "1"}, {"false", "no", "0", ""}
# A JobSpec field -> the pod field a user wrote it in (how a validation error names it).
_FIELDS = {
    "gpus": f"resources.limits[{GPU}]",
    "job_type": f"metadata.annotations[{JOB_TYPE}]",
    "model_card": f"metadata.annotations[{MODEL_CARD}]",
    "gpu_memory": f"metadata.annotations[{GPU_MEMORY}]",
    "min_speed": f"metadata.annotations[{MIN_SPEED}]",
    "queue": f"metadata.labels[{QUEUE_LABEL}]",
    "priority_class": "spec.priorityClassName",
    "gpu_types": f"spec.nodeSelector[{PRODUCT}]",
    "name": "metadata.name",
    "owner": "metadata.namespace",
    "command": "spec.containers[0].command",
}


def annotation(key: str) -> str:
    return f"metadata.annotations[{key}]"


@dataclass(frozen=True, slots=True)
class PodAsk:
    """One pod: who it is, where it is, and what it asks for."""

    namespace: str
    name: str
    uid: str
    spec: JobSpec  # per pod (a gang's job is made from its pods: horus_core.k8s.gangs)
    created: float  # creation time (epoch s)
    node: str = ""  # spec.nodeName ("" = not bound)
    phase: str = "Pending"
    gang: str = ""  # "" = none; else the gang's name within the namespace
    gang_size: int = 0  # horus.io/gang-size (0: from the PodGroup, or not a gang)
    pod_group: bool = False  # the gang is a coscheduling PodGroup (its minMember is the size)
    memory_share: float = 0.0  # > 0: a share of the GPU's memory (HAMi percentage, KAI fraction)
    cores: int = 0  # HAMi nvidia.com/gpucores (per cent; 0 = not asked)
    cpu: float = 0.0  # cores requested
    memory: float = 0.0  # bytes requested
    planned: tuple[str, tuple[int, ...]] | None = None  # Horus's plan on it: (node, GPU indices)
    container_gpus: tuple[int, ...] = ()  # GPUs per container (HAMi's annotations are per container)
    gang_rank: int = -1  # a placed gang pod's node rank (horus.io/rank; -1 = none)
    mig: str = ""  # a MIG profile asked for ("1g.10gb": nvidia.com/mig-1g.10gb), "" = none
    waiting: tuple[str, str] = ("", "")  # its PodScheduled=False (reason, message) as last written

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang_key(self) -> str:
        return f"{self.namespace}/{self.gang}" if self.gang else ""


def _meta(pod: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, str], Mapping[str, str]]:
    meta = pod.get("metadata") or {}
    return meta, meta.get("annotations") or {}, meta.get("labels") or {}


def pod_ask(pod: Mapping[str, Any], queues: QueueConfig | None = None) -> PodAsk:
    """The pod's ask; InvalidArgument naming the pod's field for a bad value."""
    meta, notes, labels = _meta(pod)
    spec = pod.get("spec") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    res = _resources(spec)
    mig, mig_count = _mig(spec)
    if mig and res.gpu:
        raise InvalidArgument(
            f"resources.limits[{MIG_PREFIX}{mig}]", f"ask for {GPU} or a MIG profile, not both"
        )
    gpus, share, mem_mib, cores = _gpu_ask(replace(res, gpu=res.gpu or mig_count), notes)
    job = JobSpec(
        command=_command(spec, namespace, name),
        gpus=gpus,
        name=name,
        owner=namespace,
        job_type=str(notes.get(JOB_TYPE, "")),
        exclusive=_bool(notes, EXCLUSIVE),
        priority=max(-MAX_PRIORITY, min(MAX_PRIORITY, _int(spec.get("priority", 0), "spec.priority"))),
        hints=ProfileHints(util_peak=float(cores) if cores else (share * 100 if share else None)),
        min_speed=_min_speed(notes),
        gpu_memory_mib=mem_mib,
        gpu_types=_types(spec),
        queue=_queue(namespace, labels, queues),
        priority_class=_class(spec, queues),
        grace_s=min(MAX_GRACE_S, float(_int(spec.get("terminationGracePeriodSeconds") or 0, "grace"))),
        model_card=_card(notes),
    )
    job = _validated(job)
    gang, size, group = _gang(labels)
    return PodAsk(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        spec=job,
        created=_time(meta.get("creationTimestamp")),
        node=str(spec.get("nodeName") or ""),
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        gang=gang,
        gang_size=size,
        pod_group=group,
        memory_share=share,
        cores=cores,
        cpu=res.cpu,
        memory=res.memory,
        planned=_planned(notes),
        container_gpus=res.container_gpus,
        gang_rank=_rank(notes),
        waiting=_waiting(pod),
        mig=mig,
    )


def _card(notes: Mapping[str, str]) -> ModelCard | None:
    if MODEL_CARD not in notes:
        return None
    try:
        return parse_card(notes[MODEL_CARD])
    except InvalidArgument as exc:
        where = exc.field.removeprefix("model_card").lstrip(".")
        raise InvalidArgument(
            annotation(MODEL_CARD), f"{where + ': ' if where else ''}{exc.message}"
        ) from None


def _validated(job: JobSpec) -> JobSpec:
    try:
        return validate_spec(job)
    except InvalidArgument as exc:
        raise InvalidArgument(_FIELDS.get(exc.field, exc.field), exc.message) from None


@dataclass(frozen=True, slots=True)
class _Resources:
    gpu: int
    hami_mem: int
    hami_pct: int
    hami_cores: int
    cpu: float
    memory: float
    container_gpus: tuple[int, ...]


def _resources(spec: Mapping[str, Any]) -> _Resources:
    """What the containers ask: summed over the containers, at least each init container's."""
    keys = (GPU, HAMI_MEM, HAMI_MEM_PCT, HAMI_CORES, "cpu", "memory")
    total = dict.fromkeys(keys, 0.0)
    per: list[int] = []
    for i, c in enumerate(spec.get("containers") or []):
        got = _container(c, f"spec.containers[{i}]", keys)
        per.append(int(got[GPU]))
        for k in (GPU, "cpu", "memory"):
            total[k] += got[k]
        for k in (HAMI_MEM, HAMI_MEM_PCT, HAMI_CORES):  # (per GPU: the largest container's ask)
            total[k] = max(total[k], got[k])
    for i, c in enumerate(spec.get("initContainers") or []):
        got = _container(c, f"spec.initContainers[{i}]", keys)
        for k in keys:
            total[k] = max(total[k], got[k])
    return _Resources(
        int(total[GPU]),
        int(total[HAMI_MEM]),
        int(total[HAMI_MEM_PCT]),
        int(total[HAMI_CORES]),
        total["cpu"],
        total["memory"],
        tuple(per),
    )


def _mig(spec: Mapping[str, Any]) -> tuple[str, int]:
    """The MIG profile the containers ask for and how many instances (("", 0): none)."""
    asked: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or []):
        res = c.get("resources") or {}
        for key, value in ((res.get("limits") or {}) | (res.get("requests") or {})).items():
            if str(key).startswith(MIG_PREFIX):
                field = f"spec.containers[{i}].resources.limits[{key}]"
                try:
                    asked[str(key)] = asked.get(str(key), 0) + parse_count(value)
                except ValueError as exc:
                    raise InvalidArgument(field, str(exc)) from None
    asked = {k: v for k, v in asked.items() if v}
    if len(asked) > 1:
        raise InvalidArgument(
            f"resources.limits[{MIG_PREFIX}*]", f"one MIG profile per pod, got {', '.join(asked)}"
        )
    if not asked:
        return "", 0
    key, count = next(iter(asked.items()))
    return key.removeprefix(MIG_PREFIX), count


def _container(c: Mapping[str, Any], where: str, keys: Sequence[str]) -> dict[str, float]:
    res = c.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    out: dict[str, float] = {}
    for k in keys:
        source, kind = (limits, "limits") if k in limits else (requests, "requests")
        value = source.get(k, 0)
        field = f"{where}.resources.{kind}[{k}]"
        try:
            out[k] = parse_quantity(value) if k in ("cpu", "memory") else float(parse_count(value))
        except ValueError as exc:
            raise InvalidArgument(field, str(exc)) from None
    return out


def _gpu_ask(res: _Resources, notes: Mapping[str, str]) -> tuple[int, float, int, int]:
    """(GPUs, share of a GPU's memory, declared MiB per GPU, HAMi cores) from every dialect."""
    gpus = res.gpu
    if res.hami_pct > 100:
        raise InvalidArgument(
            f"resources.limits[{HAMI_MEM_PCT}]", f"at most 100 (per cent), got {res.hami_pct}"
        )
    if res.hami_cores > 100:
        raise InvalidArgument(
            f"resources.limits[{HAMI_CORES}]", f"at most 100 (per cent), got {res.hami_cores}"
        )
    share = res.hami_pct / 100.0
    mem = res.hami_mem
    if KAI_FRACTION in notes:
        share = _fraction(notes[KAI_FRACTION])
        gpus = gpus or 1
    if KAI_MEMORY in notes:
        mem = _mib(notes[KAI_MEMORY], annotation(KAI_MEMORY), bare_mib=True)
        gpus = gpus or 1
    if GPU_MEMORY in notes:
        mem = _mib(notes[GPU_MEMORY], annotation(GPU_MEMORY))
    if gpus < 1:
        raise InvalidArgument(
            f"resources.limits[{GPU}]",
            f"the pod asks for no GPU: Horus places GPU pods (ask {GPU}: N, or KAI's gpu-fraction)",
        )
    if gpus > MAX_GPUS_PER_JOB:
        raise InvalidArgument(f"resources.limits[{GPU}]", f"at most {MAX_GPUS_PER_JOB}, got {gpus}")
    return gpus, share, mem, res.hami_cores


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value <= 1.0:
        raise InvalidArgument(annotation(KAI_FRACTION), f"a share of one GPU in (0, 1], got {text[:40]!r}")
    return value


def _mib(text: str, field: str, *, bare_mib: bool = False) -> int:
    try:
        return parse_size(text)  # (a bare number is MiB, as KAI's gpu-memory is)
    except ValueError as exc:
        hint = " (MiB)" if bare_mib else ""
        raise InvalidArgument(field, f"{exc}{hint}") from None


def _bool(notes: Mapping[str, str], key: str) -> bool:
    text = str(notes.get(key, "")).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidArgument(annotation(key), f"true or false, got {text[:40]!r}")


def _min_speed(notes: Mapping[str, str]) -> float:
    if MIN_SPEED not in notes:
        return 0.0
    text = str(notes[MIN_SPEED]).strip().lower()
    if text == "none":
        return NO_FLOOR
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(
            annotation(MIN_SPEED), f"a speed in [0, 1] (1.0 = solo) or none, got {text[:40]!r}"
        )
    return value


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InvalidArgument(field, f"a whole number, got {str(value)[:40]!r}")
    return int(value)


def _command(spec: Mapping[str, Any], namespace: str, name: str) -> tuple[str, ...]:
    """The first container's command and args (what Horus shows), else the pod's name."""
    containers = spec.get("containers") or [{}]
    words = [str(w) for w in (containers[0].get("command") or []) + (containers[0].get("args") or [])]
    return tuple(words) or (f"pod:{namespace}/{name}",)


def _types(spec: Mapping[str, Any]) -> tuple[str, ...]:
    product = (spec.get("nodeSelector") or {}).get(PRODUCT)
    return (gpu_type_of(str(product)),) if product else ()


def _queue(namespace: str, labels: Mapping[str, str], queues: QueueConfig | None) -> str:
    asked = str(labels.get(QUEUE_LABEL, ""))
    if queues is None:
        return asked or namespace
    if asked:
        if asked not in queues.queues:
            known = ", ".join(queues.queues)
            raise InvalidArgument(
                f"metadata.labels[{QUEUE_LABEL}]", f"unknown queue {asked!r}; queues: {known}"
            )
        return asked
    return namespace if namespace in queues.queues else queues.queue_of(namespace)


def _class(spec: Mapping[str, Any], queues: QueueConfig | None) -> str:
    """``priorityClassName`` where ``--queues`` names that class ("" otherwise: the default one;
    a cluster's own classes such as system-node-critical are not Horus's)."""
    name = str(spec.get("priorityClassName") or "")
    return name if queues is not None and name in queues.classes else ""


def _gang(labels: Mapping[str, str]) -> tuple[str, int, bool]:
    if GANG in labels:
        raw = str(labels.get(GANG_SIZE, ""))
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= MAX_GPUS_PER_JOB:
            raise InvalidArgument(
                f"metadata.labels[{GANG_SIZE}]",
                f"the gang's pod count, 1..{MAX_GPUS_PER_JOB}, got {raw[:40]!r}",
            )
        return str(labels[GANG]), size, False
    for key in POD_GROUP_LABELS:
        if labels.get(key):
            return str(labels[key]), 0, True
    return "", 0, False


def _planned(notes: Mapping[str, str]) -> tuple[str, tuple[int, ...]] | None:
    node, gpus = str(notes.get(NODE, "")), str(notes.get(GPUS, ""))
    if not node or not gpus:
        return None
    try:
        return node, tuple(int(g) for g in gpus.split(","))
    except ValueError:
        return None  # (not Horus's writing: decided again)


def _waiting(pod: Mapping[str, Any]) -> tuple[str, str]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("reason", "")), str(c.get("message", ""))
    return "", ""


def _rank(notes: Mapping[str, str]) -> int:
    try:
        return int(notes.get(RANK, "-1"))
    except ValueError:
        return -1


def _time(stamp: object) -> float:
    if not isinstance(stamp, str) or not stamp:
        return 0.0
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def with_gpus(ask: PodAsk, gpus: int, gpus_per_node: int = 0, nodes: int = 0) -> JobSpec:
    """The pod's spec with ``gpus`` and a gang's shape (``gpus_per_node`` on each of ``nodes``)."""
    return replace(ask.spec, gpus=gpus, gpus_per_node=gpus_per_node, nodes=nodes)
