"""``fifo``: exclusive GPUs in arrival order, what Kubernetes and Slurm do. The baseline.

A job gets whole GPUs that nobody else uses (a gang: all or none) on one node (best fit); a job
larger than every node (or whose shape asks for several) is spread over the fewest nodes of
one rack, else the fewest racks (:mod:`horus_core.policies.spread`). Jobs are served in
arrival order; one that does not fit waits with a reason and later jobs may pass it.

The module is fifo's stage alone (:class:`Fifo`, over a :class:`~.stage.Tier`); the GPU-type
tiers and the head gang's reservation are the driver's (``staged.drive(Fifo())``).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from horus_core.model import Action
from horus_core.policies._wide import free_on, place_wide
from horus_core.policies.base import busy_gpu_uuids
from horus_core.policies.spread import FreeNode
from horus_core.policies.stage import Tier


def free_gpus(view: Tier) -> dict[str, list[str]]:
    """Per ready node of ``view``, its healthy GPUs no active job holds (uuids, in index order;
    the GPUs the view hides left out)."""
    return {n.name: list(n.free) for n in _free(view, busy_gpu_uuids(view.snapshot.jobs).keys())}


def place_exclusive(view: Tier) -> list[Action]:
    """Every pending job of ``view`` on whole GPUs nobody else uses, in arrival order (higher
    priority first): one node, best fit; a gang larger than every node over the fewest nodes
    of one rack, else the fewest racks. A job that does not fit gets a Wait with the reason."""
    s = view.snapshot
    busy = busy_gpu_uuids(s.jobs).keys()
    return place_wide(s, view.layout.largest_node, s.pending(), (), busy, _free(view, busy))[0]


def _free(view: Tier, busy: AbstractSet[str]) -> list[FreeNode]:
    return free_on(view.layout, {n.name: n.rack for n in view.snapshot.nodes}, busy)


@dataclass(frozen=True)
class Fifo:
    """fifo's one stage; ``staged.drive(Fifo())`` is the policy (the tiers around it)."""

    name: str = "fifo"

    def serve(self, view: Tier) -> list[Action]:
        """Every pending job placed as the packing policies place their gangs across nodes."""
        return place_exclusive(view)
