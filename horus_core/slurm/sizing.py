"""The adaptive pool's decision (``horus-slurm up --adaptive``): how many pilots to submit and
which to release, from the master's queue and the pilots' state. Pure; the loop that reads the
queue and runs sbatch / scancel is :mod:`horus_core.slurmcli.adaptive`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from horus_core.model import JobSpec


@dataclass(frozen=True, slots=True)
class PoolPilot:
    job_id: str
    registered: bool  # its worker is READY on the master (False: queued in Slurm, or starting)
    gpus: int
    busy: bool = False  # a job runs on one of its GPUs
    idle_since: float | None = None  # registered and idle: since when (None: busy or starting)


@dataclass(frozen=True, slots=True)
class Sizing:
    submit: int  # pilots to submit now
    release: tuple[str, ...]  # Slurm job ids to cancel now
    why: str


def wanted_gpus(specs: Iterable[JobSpec], gpus_per_node: int) -> int:
    """The GPUs pending jobs ask for that pilots of ``gpus_per_node`` GPUs could give (a job of
    more GPUs per node than a pilot has would keep the pool at its largest for nothing)."""
    return sum(
        max(1, s.gpus_min or s.gpus) for s in specs if not s.gpus_per_node or s.gpus_per_node <= gpus_per_node
    )


def decide(
    pilots: Sequence[PoolPilot],
    *,
    waiting_gpus: int,
    free_gpus: int,
    gpus_per_node: int,
    min_pilots: int,
    max_pilots: int,
    grace_s: float,
    now: float,
) -> Sizing:
    """Submit when jobs wait for more GPUs than are free or on their way; release pilots idle for
    ``grace_s`` (and pilots still queued in Slurm) once nothing waits, never below ``min_pilots``."""
    coming = sum(p.gpus for p in pilots if not p.registered)
    shortfall = waiting_gpus - free_gpus - coming
    want = math.ceil(shortfall / gpus_per_node) if shortfall > 0 else 0
    submit = max(min(want, max_pilots - len(pilots)), min_pilots - len(pilots), 0)
    if submit:
        return Sizing(submit, (), f"{waiting_gpus} GPU(s) wanted, {free_gpus} free, {coming} on the way")
    spare = len(pilots) - min_pilots
    if spare <= 0 or waiting_gpus > free_gpus:
        return Sizing(0, (), "pool size kept")
    queued = [p.job_id for p in pilots if not p.registered] if waiting_gpus == 0 else []
    idle = sorted(
        (p for p in pilots if p.registered and not p.busy and p.idle_since is not None),
        key=lambda p: p.idle_since or 0.0,
    )
    done = [p.job_id for p in idle if now - (p.idle_since or now) >= grace_s]
    release = tuple([*queued, *done][:spare])
    return Sizing(
        0, release, f"{len(release)} pilot(s) idle for {grace_s:g} s" if release else "pool size kept"
    )
