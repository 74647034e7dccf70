"""The one seam every policy implements: ``decide(snapshot, now) -> list[Action]``, and the one
way a policy hears the jobs' progress reports.

Policies are plain synchronous objects that may keep state between calls but never do I/O. A
policy that wants progress reports has a ``progress`` attribute that :class:`HearsProgress`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from horus_core.model import Action, ClusterSnapshot, Job, Node


class Policy(Protocol):
    name: str

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        """Return the actions to apply now: Assign / Preempt for changes, Wait with a reason for
        every pending job that stays pending."""
        ...


Report = tuple[str, float, "float | None", float]  # (job id, step, loss or None, when)


@dataclass(frozen=True, slots=True)
class Reports:
    """Progress reports as columns, in order: job id, step, loss (None: no report has one), time;
    ``numbers``: the source's name and job numbers, where it numbers its jobs for good."""

    ids: Sequence[str]
    steps: NDArray[np.float64]
    losses: Sequence[float | None] | None
    at: NDArray[np.float64]
    numbers: tuple[str, NDArray[np.int64]] | None = None

    @staticmethod
    def of(reports: Iterable[Report]) -> Reports:
        """The reports given one by one (job id, step, loss or None, when)."""
        rows = list(reports)
        losses = [r[2] for r in rows]
        return Reports(
            [r[0] for r in rows],
            np.array([r[1] for r in rows], np.float64),
            losses if any(loss is not None for loss in losses) else None,
            np.array([r[3] for r in rows], np.float64),
        )

    def __len__(self) -> int:
        return len(self.ids)


@runtime_checkable
class HearsProgress(Protocol):
    """What hears a policy's progress reports (its ``progress`` attribute)."""

    def hear(self, reports: Reports) -> None: ...


def progress_of(policy: object) -> HearsProgress | None:
    """The part of ``policy`` that hears progress reports, or None."""
    progress = getattr(policy, "progress", None)
    return progress if isinstance(progress, HearsProgress) else None


def residents(jobs: Iterable[Job]) -> dict[str, list[Job]]:
    """Who is on GPU g: GPU uuid -> the active jobs of ``jobs`` on it (in their order)."""
    out: dict[str, list[Job]] = {}
    for job in jobs:
        if job.state.active:
            for uuid in job.gpus:
                out.setdefault(uuid, []).append(job)
    return out


def busy_gpu_uuids(jobs: Iterable[Job]) -> dict[str, list[str]]:
    """GPU uuid -> ids of the active jobs on it (:func:`residents`)."""
    return {uuid: [j.id for j in on] for uuid, on in residents(jobs).items()}


def arrival_order(jobs: Sequence[Job]) -> list[Job]:
    """Higher priority first, then submission time, then id (a total, deterministic order)."""
    return sorted(jobs, key=lambda j: (-j.spec.priority, j.submitted_at, j.id))


def hide_gpus(nodes: Sequence[Node], hidden: Collection[str]) -> tuple[Node, ...]:
    """The nodes with the GPUs of ``hidden`` marked unhealthy (a node with none of them: itself)."""
    out = []
    for n in nodes:
        if any(g.uuid in hidden for g in n.gpus):
            gpus = tuple(dataclasses.replace(g, healthy=False) if g.uuid in hidden else g for g in n.gpus)
            n = dataclasses.replace(n, gpus=gpus)
        out.append(n)
    return tuple(out)
