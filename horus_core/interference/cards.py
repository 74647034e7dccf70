"""What the interference model knows of jobs by their model cards: the predicted profile, the
completion's priors, and the solo speed a card implies on each GPU type.

A card's solo speed: its step takes, on a GPU type, the roofline time of the predictor's feature
(:meth:`Predictor.step_seconds`: the datasheet's peaks, nothing fitted); measured on one type, the
others are scaled from that measurement by the same ratios. Across GPU types the ratios say where
a job runs fast (the heterogeneity tiers, :mod:`horus_core.policies.gputypes`, read only ratios);
the absolute values are rough. It is 0 (cannot run there) where the predicted footprint does not
fit the GPU's memory with the reserve left free, or where the job was seen not to run at all
(:meth:`CardBook.cannot_run`). (Per-type efficiencies and a time per operator fitted to the
table's solo throughputs were tried: they made the P100 look as fast as the V100 for most jobs
and did worse, docs/prediction.md.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core.interference.gpus import GPUS
from horus_core.interference.predictor import Predictor, packaged_predictor
from horus_core.interference.profiles import RESERVE_MIB
from horus_core.interference.signature import JobProfile
from horus_core.modelcard import ModelCard

SOLO_WEIGHT = 0.3  # EWMA weight of a new solo measurement


@dataclass
class CardBook:
    predictor: Predictor | None = None  # None: the packaged one, loaded at the first card
    cards: dict[str, ModelCard] = field(default_factory=dict)
    profiles: dict[str, JobProfile] = field(default_factory=dict)  # card-predicted profiles
    priors: dict[str, tuple[float, float]] = field(default_factory=dict)  # (sensitivity, intensity)
    cannot: set[tuple[str, int, str]] = field(default_factory=set)  # (signature, GPUs, GPU type)
    solo: dict[tuple[str, int, str], float] = field(default_factory=dict)  # measured steps/s alone

    def add(self, signature: str, card: ModelCard, predictor: Predictor | None = None) -> bool:
        """Register ``card`` under ``signature`` (predicted by ``predictor``, default the book's);
        False if it was already its card."""
        if self.cards.get(signature) == card and predictor is None:
            return False
        self.predictor = self.predictor or packaged_predictor()
        p = (predictor or self.predictor).predict(card)
        self.cards[signature] = card
        self.profiles[signature] = JobProfile(p.util_avg, p.util_peak, p.mem_mib, "card")
        self.priors[signature] = (p.sensitivity, p.intensity)
        return True

    def cannot_run(self, signature: str, gpus: int, gpu_type: str) -> bool:
        """It was seen not to run at all on this GPU type; False if that was known."""
        key = (signature, gpus, gpu_type)
        if key in self.cannot:
            return False
        self.cannot.add(key)
        return True

    def observe_solo(self, signature: str, gpus: int, gpu_type: str, rate: float) -> bool:
        """A measured solo speed (steps/s); False if it changed nothing."""
        key = (signature, gpus, gpu_type)
        old = self.solo.get(key)
        new = rate if old is None else old + SOLO_WEIGHT * (rate - old)
        if old == new:
            return False
        self.solo[key] = new
        return True

    def solo_speed(self, signature: str, gpus: int, gpu_type: str) -> float | None:
        """Steps/s alone: measured here, else implied by the card (see the module doc) and scaled
        to a type where it was measured; None without either."""
        key = (signature, gpus, gpu_type)
        if key in self.cannot:
            return 0.0
        measured = self.solo.get(key)
        if measured is not None:
            return measured
        card = self.cards.get(signature)
        spec = GPUS.get(gpu_type)
        if card is None or spec is None or self.predictor is None:
            return None
        if self.profiles[signature].mem_mib > spec.memory_mib - RESERVE_MIB:
            return 0.0
        seconds = self.predictor.step_seconds(card, gpu_type)
        for (sig, n, other), rate in self.solo.items():  # (few: one per type it ran alone on)
            if sig == signature and n == gpus and rate > 0.0:
                return rate * self.predictor.step_seconds(card, other) / seconds
        return max(1, gpus) / seconds

    @property
    def any_zero(self) -> bool:
        """Whether some card job may be kept off a GPU type (cannot run, or does not fit)."""
        return bool(self.cannot or self.cards)
