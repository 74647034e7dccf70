"""A packing policy's configuration (:class:`Packing`) and the shipped queue orders.

Every packing policy (``binpack``, ``gandiva``, ``lucid``, the ``horus`` family) is one shell,
:class:`~horus_core.policies.pack.PackingPolicy`, with other settings: its tiers (GPU types,
heterogeneity-aware or not; the head gang's reservation, after how long), its queue order, the
kernel's parameters and co-location rule, and optionally least-attained-service levels with
preemption. A policy's module holds its configuration and its own orders; it imports this
module, not the shell (``pack.factory(config)`` makes the policy; ``docs/adding-a-policy.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from horus_core.packing.build import PairFilter
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.packing.problem import PackParams
from horus_core.policies.order import arrival_positions, las_positions, util_positions
from horus_core.policies.reservation import WAIT_S

Ix = NDArray[np.intp]
# A queue order: positions into ``live.pending``, first served first, for a policy at ``now``.
# Its first argument is the PackingPolicy that runs it (its ``name``, ``model``, ``las``...):
# typed Any here so that a configuration needs none of the shell's imports.
Order = Callable[[Any, Live, ClusterLayout, float], Ix]


class Levels(Protocol):
    """What the least-attained-service order reads of a policy's ledger
    (:class:`~horus_core.policies.attained.Attained`)."""

    @property
    def work(self) -> object | None: ...

    def levels_of(self, ids: Sequence[str]) -> NDArray[np.int64]: ...

    def left_of(self, ids: Sequence[str]) -> NDArray[np.float64]: ...


class WithLevels(Protocol):
    """A policy with least-attained-service levels (``las=True``), as :func:`by_service` reads it."""

    @property
    def name(self) -> str: ...

    @property
    def las(self) -> Levels | None: ...


def by_arrival(policy: object, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Higher priority first, then submission time (FIFO)."""
    return arrival_positions(live)


def by_utilisation(policy: object, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Higher priority, then lowest predicted utilisation (the paper's Horus order)."""
    return util_positions(live)


def by_service(policy: WithLevels, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Least attained service (the policy's ``las`` levels; confident remaining work first)."""
    las = policy.las
    if las is None:
        raise ValueError(f"{policy.name}: a least-attained-service order needs las=True")
    left = las.left_of(live.p_ids) if las.work is not None else None
    return las_positions(live, las.levels_of(live.p_ids), left=left)


@dataclass(frozen=True)
class Packing:
    """A packing policy's stages (see the module doc)."""

    name: str
    params: PackParams  # the kernel's: cost mode, jobs per GPU, speed floor, gain, look-ahead
    refused: str  # what a refusal by the co-location rule means (a Wait's reason)
    order: Order = by_arrival
    split_by_gpus: bool = False  # jobs share a GPU only with jobs of as many GPUs
    pair_filter: PairFilter | None = None  # the policy's own co-location rule (None: memory only)
    las: bool = False  # least-attained-service levels, and preemption for a waiting lower level
    preempt: bool = True  # (las) preempt for a waiting lower level (False: the levels alone)
    slice_growth: float = 1.0  # (las) a stopped job's minimum slice grows this much per stop
    hears: bool = False  # (las) remaining work from progress reports orders confident jobs
    hetero: bool = False  # heterogeneity-aware GPU-type tiers (:class:`HeteroRule`)
    allocate: bool = False  # (hetero) a type per job by the allocation, and moves up (:mod:`.allocate`)
    gang_wait_s: float | None = WAIT_S  # the head gang's reservation after this wait (None: off)
