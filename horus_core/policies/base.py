"""The one seam every policy implements: ``decide(snapshot, now) -> list[Action]``.

Policies are plain synchronous objects. They may keep state between calls (rounds, queues,
credits), but they never do I/O: the live master and the simulator call them the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from horus_core.model import Action, ClusterSnapshot, Gpu, Job, NodeState


class Policy(Protocol):
    name: str

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        """Return the actions to apply now: Assign / Preempt for changes, Wait with a reason for
        every pending job that stays pending."""
        ...


def gpus_by_node(snapshot: ClusterSnapshot) -> dict[str, list[Gpu]]:
    """Healthy GPUs of READY nodes, grouped by node, in index order."""
    out: dict[str, list[Gpu]] = {}
    for node in snapshot.nodes:
        if node.state is NodeState.READY:
            out[node.name] = sorted((g for g in node.gpus if g.healthy), key=lambda g: g.index)
    return out


def busy_gpu_uuids(jobs: Iterable[Job]) -> dict[str, list[str]]:
    """GPU uuid -> ids of the active jobs on it."""
    out: dict[str, list[str]] = {}
    for job in jobs:
        if job.state.active:
            for uuid in job.gpus:
                out.setdefault(uuid, []).append(job.id)
    return out


def arrival_order(jobs: Sequence[Job]) -> list[Job]:
    """Higher priority first, then submission time, then id (a total, deterministic order)."""
    return sorted(jobs, key=lambda j: (-j.spec.priority, j.submitted_at, j.id))
