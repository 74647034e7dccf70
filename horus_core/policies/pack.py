"""The packing policies' one shell: :class:`PackingPolicy`, configured by a
:class:`~.packing_config.Packing` (which lives apart, so that a policy's module, its
configuration, imports none of the shell's tiers).

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

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action
from horus_core.packing import PairFilter
from horus_core.policies.attained import Attained
from horus_core.policies.backfill import GangReserve
from horus_core.policies.gputypes import HeteroRule, TypeGate
from horus_core.policies.packer import Ask, Packer
from horus_core.policies.packing_config import Packing
from horus_core.policies.remaining import RemainingWork
from horus_core.policies.staged import Stages
from horus_core.policies.state import Book, PassState
from horus_core.policies.views import View


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


Factory = Callable[[InterferenceModel | None], PackingPolicy]


def build(config: Packing, model: InterferenceModel | None = None) -> PackingPolicy:
    """The packing policy ``config`` configures, on ``model`` (None: the packaged default)."""
    return PackingPolicy(model or default_model(), config)


def factory(config: Packing) -> Factory:
    """The registry's factory of the policy ``config`` configures (:func:`build`)."""
    return lambda model: build(config, model)
