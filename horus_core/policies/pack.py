"""The packing policies' one shell: :class:`PackingPolicy`, configured by :class:`Packing`.

Every packing policy (``binpack``, ``gandiva``, ``lucid``, the ``horus`` family) is the same
stages with other settings: its tiers (GPU types, heterogeneity-aware or not; the head gang's
reservation, after how long), its queue order, the kernel's parameters and co-location rule,
and optionally least-attained-service levels with preemption (fed by progress reports where
``hears``). The modules of the policies hold their configurations and their own orders or
rules; a new packing policy is a new :class:`Packing` (``docs/adding-a-policy.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action
from horus_core.packing import PackParams, PairFilter
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.attained import Attained
from horus_core.policies.backfill import WAIT_S, GangReserve
from horus_core.policies.gputypes import HeteroRule, TypeGate
from horus_core.policies.order import arrival_positions, las_positions, util_positions
from horus_core.policies.packer import Ask, Packer
from horus_core.policies.remaining import RemainingWork
from horus_core.policies.staged import Stages
from horus_core.policies.state import Book, PassState
from horus_core.policies.views import View

Ix = NDArray[np.intp]
# A queue order: positions into ``live.pending``, first served first, for a policy at ``now``.
Order = Callable[["PackingPolicy", Live, ClusterLayout, float], Ix]


def by_arrival(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Higher priority first, then submission time (FIFO)."""
    return arrival_positions(live)


def by_utilisation(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Higher priority, then lowest predicted utilisation (the paper's Horus order)."""
    return util_positions(live)


def by_service(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
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

    def build(self, model: InterferenceModel | None) -> PackingPolicy:
        """The policy on ``model`` (None: the packaged default): the registry's factory."""
        return PackingPolicy(model or default_model(), self)


@dataclass
class PackingPolicy(Stages):
    """A packing policy: the stages :class:`Packing` configures, over one pass state."""

    model: InterferenceModel
    config: Packing
    name: str = field(init=False)
    las: Attained | None = field(init=False, repr=False, compare=False)
    gate: TypeGate = field(init=False, repr=False, compare=False)
    book: Book = field(default_factory=Book, init=False, repr=False, compare=False)
    packer: Packer = field(default_factory=Packer, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cfg = self.config
        self.name = cfg.name
        work = RemainingWork() if cfg.hears else None
        self.las = Attained(slice_growth=cfg.slice_growth, work=work) if cfg.las else None
        reserve = None if cfg.gang_wait_s is None else GangReserve(wait_s=cfg.gang_wait_s)
        self.gate = TypeGate(HeteroRule(allocate=cfg.allocate) if cfg.hetero else None, reserve=reserve)

    @property
    def progress(self) -> RemainingWork | None:
        """What hears progress reports: the remaining-work estimates (None: none)."""
        return self.las.work if self.las is not None else None

    @property
    def pair_filter(self) -> PairFilter | None:
        return self.config.pair_filter

    def observe(self, state: PassState) -> None:
        if self.las is not None:
            self.las.observe(state)

    def serve(self, view: View) -> list[Action]:
        cfg, now = self.config, view.state.now
        order = cfg.order
        ask = Ask(self.model, cfg.params, cfg.refused, lambda live, layout: order(self, live, layout, now),
                  cfg.split_by_gpus, self.pair_filter)  # fmt: skip
        actions = self.packer.pack(view, ask)
        if self.las is None or not cfg.preempt:
            return actions
        return [*self.las.preempts(view.snapshot, actions, now), *actions]

    def restore(
        self, service: Mapping[str, float], running: Mapping[str, tuple[int, float]], now: float
    ) -> None:
        super().restore(service, running, now)
        if self.las is not None:
            self.las.restore(service, now)
