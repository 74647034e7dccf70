"""Views the queue wrapper shows the inner policy: GPUs hidden, jobs placed earlier in the pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from horus_core.model import Assign, ClusterSnapshot, Job, Node
from horus_core.policies._placed import placed_view


def idle_gpus(snapshot: ClusterSnapshot, running: Sequence[Job]) -> int:
    busy = {u for j in running for u in j.gpus}
    return sum(1 for g in snapshot.ready_gpus() if g.uuid not in busy)


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
    """The jobs ``assigns`` placed, as the next tier must see them: ASSIGNED on their GPUs, each
    at a version of its own (a pending version would name the GPUs of an earlier pass)."""
    by_id = {j.id: j for j in jobs}
    return [placed_view(by_id[a.job_id], a.node, a.gpus) for a in assigns if a.job_id in by_id]
