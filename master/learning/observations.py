"""Handing what the learner measured to the interference model, between scheduling passes.

Model cards (what a job's model predicts of it) go the same way: a policy reads the model in a
worker thread while it decides, so observations and cards queue here and
:meth:`ModelFeed.apply` runs only while no policy does (the scheduler calls it before a pass;
the master once at start-up, before the first). A model that fails to take an observation
is logged, and the rest are still applied: nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from horus_core.interference import InterferenceModel
from horus_core.modelcard import ModelCard
from master.store.learned import PairRow

log = logging.getLogger(__name__)

MAX_SYNC = 50  # observe_pair calls to bring the model to a stored estimate (EWMA 0.3: about 25)
SYNC_TOLERANCE = 1e-4


@dataclass(frozen=True)
class ProfileObs:
    signature: str
    util_avg: float
    util_peak: float
    mem_mib: int


@dataclass(frozen=True)
class CardObs:
    """A job's model card (at submission, or a live job's at start-up), for its signature."""

    signature: str
    card: ModelCard


@dataclass(frozen=True)
class MemoryObs:
    """A peak GPU memory measured while the workload shared a GPU (an attempt contained for its
    memory, docs/sharing.md): its footprint is at least this from now on."""

    signature: str
    peak_mib: int


@dataclass(frozen=True)
class PairObs:
    """The stored estimates of one pair: a's speed next to b, and b's next to a if measured."""

    a: str
    b: str
    gpu_type: str
    speed_a: float
    speed_b: float | None  # None: never measured, keep what the model believes now


class ModelFeed:
    def __init__(self, model: InterferenceModel, limit: int) -> None:
        self._model = model
        self._limit = limit
        self._pending: list[ProfileObs | PairObs | CardObs | MemoryObs] = []

    def add(self, obs: ProfileObs | PairObs | CardObs | MemoryObs) -> None:
        if len(self._pending) < self._limit:
            self._pending.append(obs)

    def apply(self) -> int:
        """Feed the queued observations to the model; call only while no policy runs."""
        todo, self._pending = self._pending, []
        for obs in todo:
            try:
                if isinstance(obs, ProfileObs):
                    self._profile(obs)
                elif isinstance(obs, CardObs):
                    self._model.add_card(obs.signature, obs.card)
                elif isinstance(obs, MemoryObs):
                    self._model.observe_peak(obs.signature, obs.peak_mib)
                else:
                    self._pair(obs)
            except Exception:
                log.exception("interference model: could not take %r", obs)
        return len(todo)

    def _profile(self, obs: ProfileObs) -> None:
        self._model.observe_profile(obs.signature, obs.util_avg, obs.util_peak, obs.mem_mib)

    def _pair(self, obs: PairObs) -> None:
        """Make the model hold the stored estimates of this pair.

        The model smooths what it is told (an EWMA); the stored estimate is smoothed already, so
        the model is told again until it agrees. That also corrects the one case where it heard
        something else before: a direction never measured, for which it was told its own
        prediction, that now has a first measurement."""
        model = self._model
        a, b, gpu_type = obs.a, obs.b, obs.gpu_type
        speed_b = obs.speed_b
        if speed_b is None:
            speed_b = float(model.pair_speeds(a, b, gpu_type)[1])
        for _ in range(MAX_SYNC):
            model.observe_pair(a, b, gpu_type, obs.speed_a, speed_b)
            have_a, have_b = model.pair_speeds(a, b, gpu_type)
            if abs(have_a - obs.speed_a) <= SYNC_TOLERANCE and abs(have_b - speed_b) <= SYNC_TOLERANCE:
                return


def pairs_to_observe(rows: Sequence[PairRow]) -> list[PairObs]:
    """Stored per-direction rows -> one observation per pair and GPU type, with both directions
    where both were measured."""
    speeds = {(r.gpu_type, r.job_type, r.co_runner): r.speed for r in rows}
    out: list[PairObs] = []
    for (gpu_type, a, b), speed in speeds.items():
        reverse = speeds.get((gpu_type, b, a))
        if reverse is not None and b < a:
            continue  # observed once, from its other row
        out.append(PairObs(a, b, gpu_type, speed, reverse))
    return out
