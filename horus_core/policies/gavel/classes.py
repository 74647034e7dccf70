"""Jobs grouped into classes (same signature, GPU count, weight, accepted GPU types and speed
floor) and their throughput matrix.

The LPs have one row per *class* (a few dozen on the Philly traces), not per job as in Gavel:
a class gets an aggregate time fraction per GPU type, split among its members (see :mod:`lp`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Job

# (job type, GPUs, GPU type) -> measured steps/s alone, None where unknown
SoloLookup = Callable[[str, int, str], "float | None"]


def weight_of(priority: int) -> float:
    """A job spec's priority as an LP weight: 0 -> 1, p > 0 -> 1 + p, p < 0 -> 1 / (1 - p)."""
    return 1.0 + priority if priority >= 0 else 1.0 / (1.0 - priority)


@dataclass(frozen=True, slots=True)
class JobClass:
    signature: str
    gpus: int
    weight: float
    members: tuple[str, ...]  # job ids, in the order the jobs were given
    gpu_types: tuple[str, ...] = ()  # the types its jobs accept (JobSpec.gpu_types; empty: any)
    min_speed: float = 0.0  # its jobs' speed floor (JobSpec.min_speed): no pair row below it


@dataclass(frozen=True, slots=True)
class Problem:
    """What every LP reads: GPU types and their GPU counts, classes, and X[class, type]."""

    types: tuple[str, ...]
    capacity: NDArray[np.float64]  # GPUs of each type
    classes: tuple[JobClass, ...]
    throughput: NDArray[np.float64]  # steps/s of one job of the class on the type; 0: cannot run

    @property
    def sizes(self) -> NDArray[np.float64]:
        return np.array([len(c.members) for c in self.classes], dtype=np.float64)

    @property
    def gpus(self) -> NDArray[np.float64]:
        return np.array([c.gpus for c in self.classes], dtype=np.float64)

    @property
    def weights(self) -> NDArray[np.float64]:
        return np.array([c.weight for c in self.classes], dtype=np.float64)


def job_throughputs(
    job_type: str, gpus: int, types: Sequence[str], solo: SoloLookup, agnostic: bool
) -> list[float]:
    """One job's row of X: solo steps/s at its GPU count per type (0: cannot run there; 1.0
    everywhere when the table knows none; ``agnostic``: 1.0 wherever it can run)."""
    row = [solo(job_type, gpus, t) or 0.0 for t in types] if job_type else [0.0] * len(types)
    row = [max(v, 0.0) for v in row]
    if not any(row):
        return [1.0] * len(types)
    return [1.0 if (agnostic and v > 0) else v for v in row]


def accepted_only(row: list[float], types: Sequence[str], accepted: tuple[str, ...]) -> list[float]:
    """``row`` with 0 on every type the job does not accept (``accepted`` empty: any)."""
    return [v if not accepted or t in accepted else 0.0 for v, t in zip(row, types, strict=True)]


def build_problem(
    jobs: Sequence[Job],
    capacity: dict[str, int],
    solo: SoloLookup,
    signature: Callable[[Job], str],
    agnostic: bool = False,
    group: bool = True,
) -> Problem:
    """Classes of ``jobs`` over the GPU types of ``capacity``. ``group=False`` makes one class
    per job (the ungrouped LP, for checking the grouping)."""
    types = tuple(sorted(capacity))
    by_key: dict[tuple[str, int, float, tuple[str, ...], float], list[Job]] = {}
    for job in jobs:
        sig = signature(job) if group else job.id
        key = (sig, job.spec.gpus, weight_of(job.spec.priority), job.spec.gpu_types, job.spec.min_speed)
        by_key.setdefault(key, []).append(job)
    classes, rows = [], []
    for (_, gpus, weight, accepted, floor), members in by_key.items():
        first = members[0]
        row = accepted_only(
            job_throughputs(first.spec.job_type, gpus, types, solo, agnostic), types, accepted
        )
        if not any(row):
            continue  # accepts no type here: outside the LP, it waits (see policy.type_waits)
        ids = tuple(j.id for j in members)
        classes.append(JobClass(signature(first), gpus, weight, ids, accepted, floor))
        rows.append(row)
    matrix = np.array(rows, dtype=np.float64).reshape(len(classes), len(types))
    caps = np.array([capacity[t] for t in types], dtype=np.float64)
    return Problem(types, caps, tuple(classes), matrix)
