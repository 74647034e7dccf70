"""Cold starts (``horus-sim --cold-start``): policies that know nothing of the trace's job types
but their model cards, and learn what running jobs show, while the ground truth stays the table.

:func:`cold_model` is the policies' interference model: the table without a row or a profile of
any of the trace's job types (their solo throughputs and pairs are gone too), with the cards given
registered under their job types. :class:`ColdLearner` plays the workers and the master's learner:
at every event time (before the jobs due then end, and before the round) it tells that model what
the running jobs show, as a worker reports it once a
configuration has held for :data:`SETTLE_S` (a few progress reports): a job alone on its GPUs, its
utilisation, memory and speed (steps/s on that GPU type, from its progress reports); any running
job, its memory; two 1-GPU jobs sharing a GPU, both speeds; a job evicted for lack of memory, its
footprint and that it does not fit next to its co-runners (or, alone, that it cannot run on that
GPU type). What it reports is the truth model's (the table-derived profile, the measured pair),
each fact once (the truth does not change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from horus_core.interference import InterferenceModel
from horus_core.interference.profiles import GAVEL_PROFILES
from horus_core.interference.table import ThroughputTable
from horus_core.modelcard import ModelCard
from horus_core.sim.state import ACTIVE, SimJob
from horus_core.sim.world import World

SETTLE_S = 120.0


def hide_types(table: ThroughputTable, hidden: Iterable[str]) -> ThroughputTable:
    """``table`` without any solo throughput or pair of the ``hidden`` job types."""
    gone = frozenset(hidden)
    return ThroughputTable(
        solo={k: v for k, v in table.solo.items() if k[1] not in gone},
        pairs={k: v for k, v in table.pairs.items() if k[1] not in gone and k[2] not in gone},
        job_types=tuple(t for t in table.job_types if t not in gone),
        pair_gpu_types=table.pair_gpu_types,
    )


def cold_model(
    table: ThroughputTable,
    hidden: Iterable[str],
    cards: Mapping[str, ModelCard] | None = None,
    profiles: Mapping[str, tuple[float, float, int]] = GAVEL_PROFILES,
) -> InterferenceModel:
    """The policies' model of a cold start: ``hidden`` job types unknown but for their cards."""
    gone = frozenset(hidden)
    model = InterferenceModel(
        hide_types(table, gone), profiles={k: v for k, v in profiles.items() if k not in gone}
    )
    for job_type in sorted(gone):
        card = (cards or {}).get(job_type)
        if card is not None:
            model.add_card(job_type, card)
    return model


class ColdLearner:
    """What a cold model learns as jobs run (see the module doc); call :meth:`observe` before
    each round and :meth:`evicted` for each job evicted."""

    def __init__(
        self, truth: InterferenceModel, model: InterferenceModel, settle_s: float = SETTLE_S
    ) -> None:
        self.truth = truth
        self.model = model
        self.settle_s = settle_s
        self._shared_at: dict[int, float] = {}  # when each running job was last seen sharing
        self._profiles: set[str] = set()
        self._memory: set[str] = set()
        self._pairs: set[tuple[str, str, str]] = set()
        self._solo: set[tuple[str, int, str]] = set()
        self.observations = 0

    def observe(self, world: World, now: float) -> None:
        seen: set[int] = set()
        for g, residents in enumerate(world.residents):
            if len(residents) == 2:
                self._pair(world.gpu_type[g], residents[0], residents[1], now)
            for job in residents:
                if job.idx not in seen:
                    seen.add(job.idx)
                    self._job(world, job, now)
        for idx in [i for i in self._shared_at if i not in seen]:
            del self._shared_at[idx]

    def evicted(self, job: SimJob, world: World) -> None:
        """It ran out of memory next to its co-runners (whom it left on its GPUs): the worker saw
        its footprint, and the master that it did not fit next to each of them there."""
        self._remember_memory(job.signature)
        kind = world.gpu_type[job.gpus[0]]
        if job.solo.get(kind, 0.0) <= 0.0:  # it cannot run on this GPU type at all
            self.model.observe_cannot_run(job.signature, max(1, job.spec.gpus), kind)
            self.observations += 1
            return
        for g in job.gpus:
            for other in world.residents[g]:
                self.model.observe_no_fit(job.signature, other.signature, world.memory_of(g))
                self.observations += 1

    def _job(self, world: World, job: SimJob, now: float) -> None:
        if job.status != ACTIVE:
            return
        sig = job.signature
        if now - job.started_at >= self.settle_s:
            self._remember_memory(sig)
        if not all(len(world.residents[g]) == 1 for g in job.gpus):
            self._shared_at[job.idx] = now
            return
        # Changes happen only at event times, all observed: alone since it started or shared last.
        since = max(job.started_at, self._shared_at.get(job.idx, job.started_at))
        if now - since < self.settle_s:
            return
        kind, gpus = world.gpu_type[job.gpus[0]], max(1, job.spec.gpus)
        if (sig, gpus, kind) not in self._solo and job.solo.get(kind, 0.0) > 0.0:
            self._solo.add((sig, gpus, kind))
            self.model.observe_solo(sig, gpus, kind, job.solo[kind])
            self.observations += 1
        if sig not in self._profiles:
            self._profiles.add(sig)
            truth = self.truth.profile_of(sig)
            self.model.observe_profile(sig, truth.util_avg, truth.util_peak, truth.mem_mib)
            self.observations += 1

    def _remember_memory(self, sig: str) -> None:
        if sig not in self._memory:
            self._memory.add(sig)
            self.model.observe_memory(sig, self.truth.profile_of(sig).mem_mib)
            self.observations += 1

    def _pair(self, gpu_type: str, a: SimJob, b: SimJob, now: float) -> None:
        if len(a.gpus) != 1 or len(b.gpus) != 1 or now - max(a.started_at, b.started_at) < self.settle_s:
            return
        key = (gpu_type, a.signature, b.signature)
        if key in self._pairs:
            return
        self._pairs.add(key)
        self._pairs.add((gpu_type, b.signature, a.signature))
        speed_a, speed_b = self.truth.co_speeds([a.signature, b.signature], gpu_type)
        if speed_a > 0.0 and speed_b > 0.0:
            self.model.observe_pair(a.signature, b.signature, gpu_type, speed_a, speed_b)
            self.observations += 1
