"""What a submission is told beyond yes or no: names the cluster does not know (with the nearest
known ones), and whether any worker can run a job in a container at all. Pure: the master
passes in what it knows (job types with a profile, the nodes' GPU types and runtimes)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from horus_core.model import Action, Assign, Job, JobSpec, ProfileHints, Wait
from horus_core.reasoncodes import RESOURCES

DOCKER = "docker"
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
    (and no model card or hints in its place), a GPU type no registered node has (``gpu_types``
    empty: no node registered yet, not judged)."""
    out = []
    unknown = spec.job_type and not known_type(spec.job_type)
    if unknown and spec.model_card is None and spec.hints == ProfileHints():
        out.append(
            f"unknown job type {spec.job_type!r}{_did_you_mean(nearest(spec.job_type, job_types))}: "
            "with no profile and no hints it is placed as a conservative default until its first "
            "run is measured (`hctl info` lists the known job types)"
        )
    missing = [t for t in spec.gpu_types if t not in gpu_types] if gpu_types else []
    for t in missing:
        have = ", ".join(sorted(gpu_types))
        out.append(
            f"no node has GPU type {t!r} (the cluster has {have}){_did_you_mean(nearest(t, gpu_types, 1))}: "
            + (
                "the job waits until such a node joins"
                if len(missing) == len(spec.gpu_types)
                else "it is skipped"
            )
        )
    return out


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
