"""What a submission is told beyond yes or no: names the cluster does not know (with the nearest
known ones; GPU types no node has and Horus does not know are refused), and whether any worker
can run a job in a container at all. Pure: the master passes in what it knows (job types with a
profile, the nodes' GPU types and runtimes)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from horus_core.interference.gpus import GPUS
from horus_core.model import Action, Assign, Job, JobSpec, ProfileHints, Wait
from horus_core.reasoncodes import RESOURCES

DOCKER = "docker"
KNOWN_GPU_TYPES = tuple(GPUS)  # the GPU families Horus has figures for
_WORD = re.compile(r"[^a-z0-9]+")


def _key(name: str) -> str:
    return _WORD.sub("", name.lower())


def nearest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` known names like ``name``: those containing it (ignoring case and
    punctuation, so ``resnet18`` finds ``ResNet-18 (batch size 32)``), then close spellings."""
    names = sorted(set(known))
    key = _key(name)
    if not key:
        return []
    inside = [k for k in names if key in _key(k)]
    close = difflib.get_close_matches(key, [_key(k) for k in names], n=n, cutoff=0.6)
    spelled = [k for c in close for k in names if _key(k) == c]
    return list(dict.fromkeys([*inside, *spelled]))[:n]


def _did_you_mean(names: Sequence[str]) -> str:
    return f"; did you mean {' or '.join(repr(x) for x in names)}?" if names else ""


def submit_warnings(
    spec: JobSpec, known_type: Callable[[str], bool], job_types: Iterable[str], gpu_types: Collection[str]
) -> list[str]:
    """What may keep an accepted job from running as its user meant: a job type with no profile
    (and no model card or hints in its place); GPU types no registered node has (``gpu_types``:
    the nodes' types; empty: no node registered yet, not judged). A type Horus knows that no node
    has yet is only worth a word when the job accepts no type the cluster has (it waits for such a
    node); beside a type the cluster has, only an unknown one (a typo?) is named."""
    out = []
    unknown = spec.job_type and not known_type(spec.job_type)
    if unknown and spec.model_card is None and spec.hints == ProfileHints():
        out.append(
            f"unknown job type {spec.job_type!r}{_did_you_mean(nearest(spec.job_type, job_types))}: "
            "with no profile and no hints it is placed as a conservative default until its first "
            "run is measured (`hctl info` lists the known job types)"
        )
    missing = [t for t in spec.gpu_types if t not in gpu_types] if gpu_types else []
    have = ", ".join(sorted(gpu_types))
    waits = len(missing) == len(spec.gpu_types)
    for t in missing:
        if not waits and is_known_gpu_type(t):
            continue  # (v100,a100 on a V100 cluster: runs on the V100s, an A100 may join)
        known = is_known_gpu_type(t)  # (a real type: no spelling to suggest)
        near = "" if known else _did_you_mean(_nearest_gpu_types(t, gpu_types))
        what = "no node has GPU type" if known else "unknown GPU type"
        then = "the job waits until such a node joins" if waits else "it is skipped until such a node joins"
        out.append(f"{what} {t!r} (the cluster has {have}){near}: {then}")
    return out


def gpu_type_refusal(spec: JobSpec, gpu_types: Collection[str]) -> str | None:
    """Why a job is refused for its GPU types: it names some, and none of them is the type of a
    registered node (``gpu_types``) or a GPU Horus knows (:data:`KNOWN_GPU_TYPES` and their MIG
    profiles): a typo like ``v10O`` that would otherwise wait forever. Names the nearest."""
    types = spec.gpu_types
    if not types or any(t in gpu_types or is_known_gpu_type(t) for t in types):
        return None
    near = list(dict.fromkeys(n for t in types for n in _nearest_gpu_types(t, gpu_types)))[:3]
    have = f"the cluster has {', '.join(sorted(gpu_types))}" if gpu_types else "no node has registered yet"
    listed = "type" if len(types) == 1 else "types"
    return (
        f"unknown GPU {listed} {', '.join(map(repr, types))}{_did_you_mean(near)} ({have}; "
        f"known GPU types: {', '.join(KNOWN_GPU_TYPES)}, and their MIG profiles like a100-3g.20gb)"
    )


def _nearest_gpu_types(name: str, present: Collection[str]) -> list[str]:
    """The cluster's types like ``name``, else (none alike) the known ones."""
    return nearest(name, present, 2) or nearest(name, KNOWN_GPU_TYPES, 2)


_MIG_TYPE = re.compile(r"^([a-z0-9]+)-\d+g\.\d+gb(-me)?$")


def is_known_gpu_type(name: str) -> bool:
    """A GPU family of the packaged GPU table (horus_core.interference.gpus), or a MIG profile of
    one (``h100-3g.40gb``, as ``gpu_type_of`` names MIG instances)."""
    mig = _MIG_TYPE.match(name)
    return name in KNOWN_GPU_TYPES or (mig is not None and mig.group(1) in (*KNOWN_GPU_TYPES, "mig"))


def image_refusal(spec: JobSpec, runtimes: Collection[str]) -> str | None:
    """Why a job with an image cannot be accepted: every worker that said how it runs jobs runs
    them as processes (``runtimes`` empty: none said, not judged)."""
    if not spec.image or not runtimes or DOCKER in runtimes:
        return None
    return (
        f"image {spec.image!r} needs a worker started with --runtime docker, and every worker of "
        "this cluster runs jobs as local processes; submit the command without --image, or start "
        "a Docker worker"
    )


def runtime_gate(
    actions: list[Action],
    jobs: Callable[[str], Job | None],
    process: Collection[str],
    node_of: Mapping[str, str],
) -> list[Action]:
    """``actions`` with each assignment of a job with an image onto a node whose worker runs
    processes (``process``; ``node_of``: GPU uuid -> node, for a gang's other nodes) turned into
    a Wait: the job stays pending instead of failing there."""
    if not process or not any(type(a) is Assign for a in actions):
        return actions  # (a pass that places nothing: no job to look up)
    out: list[Action] = []
    for a in actions:
        job = jobs(a.job_id) if isinstance(a, Assign) else None
        if isinstance(a, Assign) and job is not None and job.spec.image:
            nodes = {a.node, *(node_of.get(u, a.node) for u in a.gpus)}
            bad = sorted(n for n in nodes if n in process)
            if bad:
                why = f"image {job.spec.image!r} needs a Docker worker (--runtime docker); {bad[0]} "
                why += "runs jobs as processes"
                a = Wait(a.job_id, why, RESOURCES)
        out.append(a)
    return out
