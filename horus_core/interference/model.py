"""The interference model: job profiles and co-location speeds, from the best source known.

Profiles, in order of trust: live measurements of the signature (EWMA), the table-derived
profile of a Gavel job type (:mod:`profiles`), the prediction from the job's model card
(:mod:`predictor`, :meth:`InterferenceModel.add_card`), the job's hints, a conservative default.
A live memory reading (:meth:`InterferenceModel.observe_memory`, taken also while the job shares
its GPU) replaces the footprint of any profile that is not itself measured.

Speeds of jobs sharing ONE GPU (1.0 = as fast as alone), in order of trust:
1. pairs measured live on this GPU type (:meth:`InterferenceModel.observe_pair`, EWMA);
2. the packaged Gavel table for this GPU type; GPU types it lacks (a100, h100, ...) use the
   V100 data (speeds are normalised, so no scaling is needed);
3. a completion of this GPU type's table pairs plus its observations (:mod:`completion`:
   collaborative filtering with per-job sensitivity and intensity, shrunk towards the type's
   mean where a job has few measured partners, and towards the sensitivity and intensity its
   model card predicts where it has a card), for every job type of the table, every signature
   observed on this GPU type and every signature with a card;
4. the analytic model over the two profiles (:func:`profiles.analytic_speed`; card-predicted
   profiles, hints, a live profile or the default), with the constants learned from the pairs
   observed on this GPU type (:mod:`analytic`), where nothing of 1-3 answers.
Pairs were measured for 1-GPU jobs; a multi-GPU job is assumed to interfere on each of its
GPUs as its 1-GPU version does. Triples were never measured: each job's speed in a triple is
the product of its speeds in the two pairs (pessimistic: it counts the overlap twice). The
packing kernel uses the same rule, so its predictions match :meth:`co_speeds` exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

import numpy as np
from numpy.typing import NDArray

from horus_core.caps import with_margin
from horus_core.interference.analytic import Sample, fit_constants
from horus_core.interference.cards import CardBook
from horus_core.interference.learned import Choice, CompletedPairs, PairObservations
from horus_core.interference.predictor import Predictor, packaged_predictor
from horus_core.interference.profiles import (
    GAVEL_PROFILES,
    RESERVE_MIB,
    analytic_speed,
    gpu_memory_of,
)
from horus_core.interference.signature import (
    CAP_MARK,
    JobProfile,
    default_profile,
    demand_key,
    hints_of_signature,
    profile_from_hints,
    signature_of,
    split_demand,
)
from horus_core.interference.table import INFEASIBLE, ThroughputTable, packaged_table
from horus_core.model import JobSpec, ProfileHints
from horus_core.modelcard import ModelCard

MAX_PER_GPU = 3
_KNOWN = frozenset({"measured", "table", "card"})  # profile sources the analytic constants learn from
EWMA_WEIGHT = 0.3  # weight of a new measurement
_TABLE_SLACK_MIB = 1024  # a table's out-of-memory pairs apply to GPUs up to 1 GiB larger
_MATRIX_CACHE = 64


class InterferenceModel:
    def __init__(
        self,
        table: ThroughputTable,
        *,
        profiles: Mapping[str, tuple[float, float, int]] = GAVEL_PROFILES,
        predictor: Predictor | None = None,
    ) -> None:
        self._table = table
        self._table_profiles = profiles  # job type -> (util avg, util peak, memory MiB)
        self._cards = CardBook(predictor)  # jobs known by their model cards
        self._memory: dict[str, int] = {}  # live memory readings of signatures not measured alone
        self._constants: dict[str, tuple[float, float]] = {}  # per GPU type: analytic (alpha, gamma)
        self._oom: dict[int, list[str]] = {}  # GPU memory -> table GPU types whose OOM pairs apply
        self._no_fit: dict[tuple[str, str], int] = {}  # pair -> the largest GPU (MiB) it did not fit
        self._measured: dict[str, JobProfile] = {}  # memory: the measured peak with the margin
        self._measured_mem: dict[str, int] = {}  # the measured peak footprint itself
        self._hinted: dict[str, JobProfile] = {}
        self._pairs = PairObservations(EWMA_WEIGHT)
        self._completed: dict[str, CompletedPairs] = {}
        self._choices: dict[str, Choice] = {}  # per GPU type: the completion's last model choice
        self._speeds: dict[tuple[str, tuple[str, ...]], tuple[float, ...]] = {}
        self._matrices: dict[tuple[str, int, tuple[str, ...]], NDArray[np.float64]] = {}
        self.version = 0  # bumped by every observation; caches keyed on it stay valid
        self._zero_types: frozenset[str] | None = None  # GPU types with a throughput-0 entry

    # ------------------------------------------------------------------ profiles
    def signature(self, spec: JobSpec) -> str:
        return signature_of(spec)

    def demand(self, spec: JobSpec) -> str:
        """The key the packing knows ``spec`` by: :func:`~.signature.demand_key` (its signature,
        with its declared GPU memory cap); :meth:`profile_of` gives that cap as its memory."""
        return demand_key(spec)

    def enter(self, spec: JobSpec) -> None:
        """Register what a job brings when it enters a pass (the job table, at its first sight
        of the spec): its model card, and the hints of an unknown job type under its signature
        (the last job to enter with other hints wins). Changes what the model answers."""
        sig = signature_of(spec)
        if spec.model_card is not None:
            self.add_card(sig, spec.model_card)
        known = self._measured.get(sig) or self._table_profile(sig) or self._cards.profiles.get(sig)
        if known is None and spec.job_type and spec.hints != ProfileHints():
            prof = profile_from_hints(spec.hints)
            if self._hinted.get(sig) != prof:
                self._hinted[sig] = prof
                self._invalidate()

    def profile(self, spec: JobSpec) -> JobProfile:
        """What the model knows of ``spec``'s job, changing nothing: its signature's profile,
        where the spec brings a card or the hints of an unknown job type, those (as
        :meth:`enter` would register them)."""
        sig = signature_of(spec)
        known = self._measured.get(sig) or self._table_profile(sig)
        if known is None and spec.model_card is not None:
            known = self._card_profile(sig, spec.model_card)
        known = known or self._cards.profiles.get(sig)
        if known is None and spec.job_type and spec.hints != ProfileHints():
            return self._with_memory(sig, profile_from_hints(spec.hints))
        return known or self.profile_of(sig)

    def _card_profile(self, signature: str, card: ModelCard) -> JobProfile:
        """The profile ``card`` predicts (the registered one where it is ``signature``'s card)."""
        if self._cards.cards.get(signature) == card:
            return self._cards.profiles[signature]
        p = (self._cards.predictor or packaged_predictor()).predict(card)
        return JobProfile(p.util_avg, p.util_peak, p.mem_mib, "card")

    def profile_of(self, signature: str) -> JobProfile:
        if CAP_MARK in signature:
            base, cap = split_demand(signature)
            prof = self.profile_of(base)
            return JobProfile(prof.util_avg, prof.util_peak, cap, prof.source)
        known = (
            self._measured.get(signature)
            or self._table_profile(signature)
            or self._cards.profiles.get(signature)
            or self._hinted.get(signature)
        )
        if known is None:
            hints = hints_of_signature(signature)
            known = default_profile() if hints is None else profile_from_hints(hints)
        return self._with_memory(signature, known)

    def _with_memory(self, signature: str, known: JobProfile) -> JobProfile:
        mem = self._memory.get(signature)
        if mem is not None and known.source != "measured":  # (a live reading: the caps' margin too)
            return JobProfile(known.util_avg, known.util_peak, with_margin(mem), known.source)
        return known

    def _table_profile(self, signature: str) -> JobProfile | None:
        row = self._table_profiles.get(signature)
        return None if row is None else JobProfile(row[0], row[1], row[2], "table")

    # ------------------------------------------------------------------ model cards
    def add_card(self, signature: str, card: ModelCard, predictor: Predictor | None = None) -> None:
        """Predict the profile of ``signature`` from its model card (the last card given for a
        signature wins; the same card again changes nothing). Call between passes, as the
        observations: it changes what the model answers. ``predictor``: another than the
        packaged one, for this card (evaluations of held-out predictors)."""
        if self._cards.add(signature, card, predictor):
            self._completed.clear()  # (their priors include the cards)
            self._invalidate()

    def card_of(self, signature: str) -> ModelCard | None:
        return self._cards.cards.get(signature)

    def known_job_types(self) -> list[str]:
        return list(self._table.job_types)

    def solo_throughput(self, job_type: str, gpus: int, gpu_type: str) -> float | None:
        """Steps/s alone: the table's, else what the job's card implies (:mod:`.cards`: good for
        ratios between GPU types, rough in absolute terms), else None."""
        found = self._table.solo.get((gpu_type, job_type, gpus))
        return found if found is not None else self._cards.solo_speed(job_type, gpus, gpu_type)

    def has_zero_solo(self, gpu_types: Iterable[str]) -> bool:
        """Whether the table gives some (job type, GPUs) throughput 0 on one of these types, or
        some card job may not run on a GPU type (where none does, no job is kept off a type by its
        throughput)."""
        zero = self._zero_types
        if zero is None:
            zero = self._zero_types = frozenset(t for (t, _, _), v in self._table.solo.items() if v == 0.0)
        return self._cards.any_zero or any(t in zero for t in gpu_types)

    def observe_solo(self, signature: str, gpus: int, gpu_type: str, steps_per_s: float) -> None:
        """A measured solo speed of a job type the table lacks on this GPU type (the table's own
        figures are kept): it answers :meth:`solo_throughput`, and anchors its card's speeds on
        the other types."""
        unknown = self._table.solo.get((gpu_type, signature, gpus)) is None
        if unknown and steps_per_s > 0.0 and self._cards.observe_solo(signature, gpus, gpu_type, steps_per_s):
            self._invalidate()

    def observe_cannot_run(self, signature: str, gpus: int, gpu_type: str) -> None:
        """It failed on this GPU type alone (too little memory there): its solo speed there is 0
        where the table does not say otherwise."""
        if self._cards.cannot_run(signature, gpus, gpu_type):
            self._invalidate()

    # ------------------------------------------------------------------ co-location
    def co_speeds(self, signatures: Sequence[str], gpu_type: str) -> tuple[float, ...]:
        order = sorted(range(len(signatures)), key=lambda i: signatures[i])
        key = (gpu_type, tuple(signatures[i] for i in order))
        speeds = self._speeds.get(key)
        if speeds is None:
            speeds = self._compute_speeds(key[1], gpu_type)
            self._speeds[key] = speeds
        out = [0.0] * len(signatures)
        for rank, i in enumerate(order):
            out[i] = speeds[rank]
        return tuple(out)

    def _compute_speeds(self, sigs: tuple[str, ...], gpu_type: str) -> tuple[float, ...]:
        n = len(sigs)
        if n == 0:
            return ()
        if not self.fits(sigs, gpu_memory_of(gpu_type)):
            return (0.0,) * n
        speeds = [1.0] * n
        for i, j in combinations(range(n), 2):
            s_i, s_j = self.pair_speeds(sigs[i], sigs[j], gpu_type)
            speeds[i] *= s_i
            speeds[j] *= s_j
        return tuple(speeds)

    def pair_speeds(self, a: str, b: str, gpu_type: str) -> tuple[float, float]:
        """Normalised speeds of a and b sharing one GPU, ignoring memory (see module doc)."""
        if CAP_MARK in a or CAP_MARK in b:  # a declared cap changes memory, not speed
            a, b = split_demand(a)[0], split_demand(b)[0]
        observed = self._pairs.get(gpu_type, a, b)
        if observed is not None:
            return observed
        measured = self._table.pairs.get((self._table.pair_type_for(gpu_type), a, b))
        if measured is not None and measured != INFEASIBLE:  # out of memory there: speed unknown
            return measured
        completed = self._completion(gpu_type).predict(a, b)
        if completed is not None:
            return completed
        pa, pb = self.profile_of(a), self.profile_of(b)
        alpha, gamma = self.constants(gpu_type)
        return (
            analytic_speed(pa.util_peak, pb.util_avg, alpha, gamma),
            analytic_speed(pb.util_peak, pa.util_avg, alpha, gamma),
        )

    def _completion(self, gpu_type: str) -> CompletedPairs:
        done = self._completed.get(gpu_type)
        if done is None:
            done = CompletedPairs(
                self._table, gpu_type, self._pairs.speeds, self._choices.get(gpu_type), self._cards.priors
            )
            self._completed[gpu_type] = done
        return done

    def constants(self, gpu_type: str) -> tuple[float, float]:
        """The analytic model's (alpha, gamma) on this GPU type (:mod:`.analytic`)."""
        found = self._constants.get(gpu_type)
        if found is None:
            found = self._constants[gpu_type] = fit_constants(self._samples(gpu_type))
        return found

    def _samples(self, gpu_type: str) -> list[Sample]:
        """The pairs observed on this type whose two jobs have a known profile (not a guess)."""
        out: list[Sample] = []
        for (g, a, b), (speed, _) in self._pairs.speeds.items():
            if g != gpu_type or speed <= 0.0:
                continue
            pa, pb = self.profile_of(a), self.profile_of(b)
            if pa.source in _KNOWN and pb.source in _KNOWN:
                out.append((pa.util_peak, pb.util_avg, speed))
        return out

    def fits(self, signatures: Sequence[str], gpu_memory_mib: int) -> bool:
        """At most 3 jobs, more than 500 MiB left free, and no pair the table saw run out of
        memory on a GPU of this size or larger."""
        if len(signatures) > MAX_PER_GPU:
            return False
        used = sum(self.profile_of(s).mem_mib for s in signatures)
        if gpu_memory_mib - used <= RESERVE_MIB:
            return False
        tables = self._oom_types(gpu_memory_mib)
        pairs = self._table.pairs
        no_fit = self._no_fit
        sigs = [split_demand(s)[0] for s in signatures]
        return not any(
            (no_fit and no_fit.get((a, b), 0) >= gpu_memory_mib)
            or any(pairs.get((t, a, b)) == INFEASIBLE for t in tables)
            for a, b in combinations(sigs, 2)
        )

    def _oom_types(self, gpu_memory_mib: int) -> list[str]:
        """The table's GPU types whose out-of-memory pairs apply to a GPU of this size."""
        found = self._oom.get(gpu_memory_mib)
        if found is None:
            found = self._oom[gpu_memory_mib] = [
                t for t in self._table.pair_gpu_types if gpu_memory_of(t) + _TABLE_SLACK_MIB >= gpu_memory_mib
            ]
        return found

    def predicted_slowdown(self, signatures: Sequence[str], gpu_type: str) -> float:
        return min(self.co_speeds(signatures, gpu_type), default=1.0)

    def pair_matrix(
        self, signatures: Sequence[str], gpu_type: str, gpu_memory_mib: int
    ) -> NDArray[np.float64]:
        """``S[i, j]`` = speed of signatures[i] sharing a GPU of this type and size with
        signatures[j]; 0.0 where the pair does not fit. Memoised; treat as read-only."""
        key = (gpu_type, gpu_memory_mib, tuple(signatures))
        out = self._matrices.get(key)
        if out is None:
            if len(self._matrices) >= _MATRIX_CACHE:  # the queue's mix changes: keep the cache small
                self._matrices.clear()
            out = np.zeros((len(signatures), len(signatures)))
            for i, j in combinations(range(len(signatures)), 2):
                self._fill(out, signatures, i, j, gpu_type, gpu_memory_mib)
            for i in range(len(signatures)):
                self._fill(out, signatures, i, i, gpu_type, gpu_memory_mib)
            self._matrices[key] = out
        return out

    def _fill(
        self, out: NDArray[np.float64], sigs: Sequence[str], i: int, j: int, gpu_type: str, mib: int
    ) -> None:
        if self.fits((sigs[i], sigs[j]), mib):
            out[i, j], out[j, i] = self.pair_speeds(sigs[i], sigs[j], gpu_type)

    # ------------------------------------------------------------------ learning
    def observe_profile(self, signature: str, util_avg: float, util_peak: float, mem_mib: int) -> None:
        """A live measurement. Utilisations follow an EWMA; the peak memory rises at once to a
        larger reading and decays only slowly, so that packing stays on the safe side; the
        profile's memory is that peak with the caps' margin (:func:`horus_core.caps.with_margin`):
        it is the cap a job of this workload gets."""
        old = self._measured.get(signature)
        if old is not None:
            w = EWMA_WEIGHT
            util_avg = old.util_avg + w * (util_avg - old.util_avg)
            util_peak = old.util_peak + w * (util_peak - old.util_peak)
            was = self._measured_mem.get(signature, mem_mib)
            mem_mib = max(mem_mib, round(was + w * (mem_mib - was)))
        else:  # (a reading taken while it shared its GPU counts too)
            mem_mib = max(mem_mib, self._memory.pop(signature, 0))
        avg = min(100.0, max(0.0, util_avg))
        peak = max(avg, min(100.0, util_peak))
        self._measured_mem[signature] = max(1, int(mem_mib))
        self._measured[signature] = JobProfile(avg, peak, with_margin(max(1, int(mem_mib))), "measured")
        self._invalidate()

    def observe_memory(self, signature: str, mem_mib: int) -> None:
        """A live memory reading of a job that may share its GPU (its utilisation is then not
        its own): the footprint rises at once to a larger reading, decays only slowly."""
        measured = self._measured.get(signature)
        old = self._measured_mem.get(signature) if measured is not None else self._memory.get(signature)
        if old is not None:
            mem_mib = max(mem_mib, round(old + EWMA_WEIGHT * (mem_mib - old)))
        mem_mib = max(1, int(mem_mib))
        if old == mem_mib:
            return
        if measured is not None:
            self._measured_mem[signature] = mem_mib
            self._measured[signature] = JobProfile(
                measured.util_avg, measured.util_peak, with_margin(mem_mib), "measured"
            )
        else:
            self._memory[signature] = mem_mib
        self._invalidate()

    def observe_peak(self, signature: str, peak_mib: int) -> None:
        """A peak GPU memory measured while the workload shared a GPU (an attempt stopped for
        going over its cap): the signature's footprint is at least this from now on."""
        if peak_mib <= self._measured_mem.get(signature, 0):
            return
        prof = self._measured.get(signature) or self.profile_of(signature)
        self._measured_mem[signature] = peak_mib
        self._measured[signature] = JobProfile(
            prof.util_avg, prof.util_peak, with_margin(peak_mib), "measured"
        )
        self._invalidate()

    def observe_no_fit(self, a: str, b: str, gpu_memory_mib: int) -> None:
        """``a`` ran out of memory next to ``b`` on a GPU of this size: the pair does not fit on
        GPUs of this size or smaller, whatever their footprints add up to (as a table's
        ``[0, 0]`` entry)."""
        if self._no_fit.get((a, b), 0) >= gpu_memory_mib:
            return
        self._no_fit[(a, b)] = self._no_fit[(b, a)] = gpu_memory_mib
        self._invalidate()

    def observe_pair(self, a: str, b: str, gpu_type: str, speed_a: float, speed_b: float) -> None:
        self._pairs.add(gpu_type, a, b, speed_a, speed_b)
        stale = self._completed.pop(gpu_type, None)
        if stale is not None and stale.choice is not None:
            self._choices[gpu_type] = stale.choice
        self._invalidate()

    def _invalidate(self) -> None:
        self._speeds.clear()
        self._matrices.clear()
        self._constants.clear()
        self.version += 1


def default_model() -> InterferenceModel:
    """A fresh model over the packaged table (the parsed table itself is shared, immutable)."""
    return InterferenceModel(packaged_table())
