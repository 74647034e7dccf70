"""Views the queue wrapper shows the inner policy: GPUs hidden, jobs placed earlier in the pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from horus_core.model import Assign, Job, JobState, Node


def hide_gpus(nodes: Sequence[Node], hide: set[str]) -> tuple[Node, ...]:
    """The nodes with the GPUs in ``hide`` marked unhealthy."""
    return tuple(
        dataclasses.replace(
            n, gpus=tuple(dataclasses.replace(g, healthy=False) if g.uuid in hide else g for g in n.gpus)
        )
        if any(g.uuid in hide for g in n.gpus)
        else n
        for n in nodes
    )


def only_gpus(nodes: Sequence[Node], keep: set[str]) -> tuple[Node, ...]:
    """The nodes with every GPU not in ``keep`` marked unhealthy."""
    return tuple(
        dataclasses.replace(
            n, gpus=tuple(g if g.uuid in keep else dataclasses.replace(g, healthy=False) for g in n.gpus)
        )
        for n in nodes
    )


def as_running(jobs: Sequence[Job], assigns: Sequence[Assign]) -> list[Job]:
    by_id = {j.id: j for j in jobs}
    return [
        dataclasses.replace(by_id[a.job_id], state=JobState.ASSIGNED, node=a.node, gpus=a.gpus)
        for a in assigns
        if a.job_id in by_id
    ]
