"""The interference learner: what running attempts measure, stored and fed to the model.

Heartbeats (per-attempt GPU use, and which attempts run where), and progress reports (samples/s
from the job's helper) arrive here. While an attempt runs its samples accumulate in memory.

- GPU use: when the attempt ends it is stored (``attempt_stats``) and folded into the profile of
  its workload signature (``profiles``, from samples where it had its GPUs to itself).
- Throughput: each report is filed under what shared the attempt's GPUs at that moment
  (:mod:`master.learning.sharing`): alone, or next to exactly one co-runner signature. When the
  attempt ends, and every ``checkpoint_s`` while it runs, the solo throughput is stored
  (``solo_throughputs``) and each shared throughput becomes a normalised pair speed
  (``pair_speeds``): shared samples/s / solo samples/s, the solo reference being the same
  attempt's solo phase, else the signature's learned solo throughput (docs/learning.md).

The model (``observe_profile``, ``observe_pair``) is only touched by :meth:`apply_observations`,
which the scheduler calls between passes (a policy may be reading the model in its thread), and
by :meth:`load` at start-up, before the scheduler runs. Nothing here raises into its callers.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel
from horus_core.model import Job, JobSpec
from horus_core.plane import AttemptProgress, Heartbeat
from master.clock import Clock
from master.learning.observations import (
    CardObs,
    MemoryObs,
    ModelFeed,
    PairObs,
    ProfileObs,
    pairs_to_observe,
)
from master.learning.sharing import AttemptKey, Rates, RateTrack, SharedNow, sharing_now, sharing_of
from master.store import Store
from master.store.learned import LearnedPair, PairMeasurement, RecordRatesOp
from master.store.nodes import AttemptStatsRow, ProfileRow, RecordAttemptOp, SaveProfileOp

log = logging.getLogger(__name__)
MAX_TRACKED = 50_000  # attempts with samples in memory; the oldest are dropped beyond it
MAX_NODES = 10_000
MIN_RATE_SAMPLES = 3  # progress reports behind a solo or shared throughput
MAX_KNOWN_SOLO = 200_000


@dataclass
class _Acc:
    node: str
    samples: int = 0
    solo_samples: int = 0
    solo_util_sum: float = 0.0
    util_sum: float = 0.0
    util_peak: float = 0.0
    mem_peak: int = 0
    step: int = 0
    loss: float | None = None
    samples_per_s: float | None = None
    rates: RateTrack = field(default_factory=RateTrack)


class Learner:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        model: InterferenceModel,
        *,
        settle_s: float = 4.0,
        checkpoint_s: float = 60.0,
    ) -> None:
        self._store = store
        self._clock = clock
        self._model = model
        self.settle_s = settle_s
        self.checkpoint_s = checkpoint_s
        self._acc: OrderedDict[AttemptKey, _Acc] = OrderedDict()
        self._on_node: dict[str, frozenset[AttemptKey]] = {}
        self._known_solo: set[tuple[str, str, int]] = set()
        self._last_checkpoint = clock.now()
        # Observations for the model wait here: a policy may be reading the model in its thread
        # right now. The scheduler hands them over between passes (apply_observations).
        self._feed = ModelFeed(model, MAX_TRACKED)

    def _get(self, key: AttemptKey, node: str) -> _Acc:
        acc = self._acc.get(key)
        if acc is None:
            acc = self._acc[key] = _Acc(node)
            while len(self._acc) > MAX_TRACKED:
                self._acc.popitem(last=False)
        return acc

    # ------------------------------------------------------------------ what workers send

    def on_heartbeat(self, node: str, hb: Heartbeat) -> None:
        per_gpu: dict[str, int] = {}
        for s in hb.jobs:
            per_gpu[s.gpu_uuid] = per_gpu.get(s.gpu_uuid, 0) + 1
        grouped: dict[AttemptKey, list[tuple[float, int, bool]]] = {}
        for s in hb.jobs:
            grouped.setdefault((s.job_id, s.attempt), []).append(
                (s.util_sm, s.mem_used_mib, per_gpu[s.gpu_uuid] == 1)
            )
        for key, readings in grouped.items():
            utils = [r[0] if math.isfinite(r[0]) else 0.0 for r in readings]
            acc = self._get(key, node)
            util = sum(utils) / len(utils)
            acc.samples += 1
            acc.util_sum += util
            acc.util_peak = max(acc.util_peak, max(utils))
            acc.mem_peak = max(acc.mem_peak, max(r[1] for r in readings))
            if all(r[2] for r in readings):
                acc.solo_samples += 1
                acc.solo_util_sum += util

    def on_placement(
        self, node: str, jobs: Sequence[Job], running: Collection[AttemptKey], gpu_types: Mapping[str, str]
    ) -> None:
        """At a heartbeat: the node's active jobs (the master's placements) and the attempts the
        worker runs. Decides, per attempt, what its next progress reports measure."""
        try:
            now = self._clock.now()
            states = sharing_of(jobs, running, gpu_types, self.signature)
            for key, sharing in states.items():
                self._get(key, node).rates.observe(sharing, now)
            for key in self._on_node.get(node, frozenset()) - states.keys():
                acc = self._acc.get(key)
                if acc is not None:
                    acc.rates.observe(None, now)
            self._on_node[node] = frozenset(states)
            if len(self._on_node) > MAX_NODES:
                self._on_node.pop(next(iter(self._on_node)))
        except Exception:
            log.exception("learner: could not classify the attempts on node %s", node)

    def on_progress(self, node: str, p: AttemptProgress) -> None:
        acc = self._get((p.job_id, p.attempt), node)
        acc.step, acc.loss, acc.samples_per_s = p.step, p.loss, p.samples_per_s
        if acc.node == node:  # (a worker cannot teach through another node's attempt)
            acc.rates.add(p.step, p.samples_per_s, self._clock.now(), self.settle_s)

    def progress(self, job_id: str, attempt: int) -> tuple[int, float | None, float | None] | None:
        acc = self._acc.get((job_id, attempt))
        return None if acc is None else (acc.step, acc.loss, acc.samples_per_s)

    def signature(self, job: Job) -> str:
        return self._model.signature(job.spec)

    def sharing_now(self) -> list[SharedNow]:
        """The attempts sharing their GPUs with one co-runner now, with what they measured so far."""
        return sharing_now({key: acc.rates for key, acc in self._acc.items()})

    def note_card(self, job: Job) -> None:
        """A job with a model card was submitted (or is live at start-up): the model predicts
        its signature's profile from it, from the next pass on (docs/prediction.md)."""
        if job.spec.model_card is not None:
            self._feed.add(CardObs(self.signature(job), job.spec.model_card))

    def footprint(self, spec: JobSpec) -> int:
        """The GPU memory the packing counts for ``spec`` (MiB): its declared cap, else its
        workload's footprint, a measured one with the caps' margin (docs/sharing.md)."""
        return self._model.profile_of(self._model.demand(spec)).mem_mib

    # ------------------------------------------------------------------ storing

    async def attempt_ended(self, job: Job, attempt: int, peak_mib: int = 0) -> None:
        """Store what the attempt measured; update its signature's profile. ``peak_mib``: the
        peak GPU memory the worker measured (its watchdog reads more often than heartbeats
        come). Never raises."""
        key = (job.id, attempt)
        acc = self._acc.pop(key, None)
        if acc is None:
            return
        acc.mem_peak = max(acc.mem_peak, peak_mib)
        for other in self._on_node.get(acc.node, frozenset()):
            peer = self._acc.get(other)
            if peer is not None:
                peer.rates.forget(key)
        try:
            rates = acc.rates.take(MIN_RATE_SAMPLES, final=True, solo_known=False)
            if rates is not None:
                await self._record_rates(rates)
        except Exception:
            log.exception("could not record the throughput of %s/%d", job.id, attempt)
        try:
            if acc.samples:
                await self._record(job, attempt, acc)
        except Exception:
            log.exception("could not record the measurements of %s/%d", job.id, attempt)

    async def checkpoint(self) -> int:
        """Every ``checkpoint_s``: store what running attempts measured so far (long jobs teach
        the model before they end). Returns the number of attempts stored. Never raises."""
        now = self._clock.now()
        if now - self._last_checkpoint < self.checkpoint_s:
            return 0
        self._last_checkpoint = now
        ready: list[Rates] = []
        for acc in list(self._acc.values()):
            ident = acc.rates.identity
            known = ident is not None and ident in self._known_solo
            try:
                rates = acc.rates.take(MIN_RATE_SAMPLES, final=False, solo_known=known)
            except Exception:
                log.exception("learner: bad samples of an attempt on %s dropped", acc.node)
                acc.rates = RateTrack()
                continue
            if rates is not None:
                ready.append(rates)
        # All at once: the writer commits them in a few group commits, not one fsync each.
        results = await asyncio.gather(*(self._record_rates(r) for r in ready), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                log.error("learner: a checkpoint write failed: %s", r)
        return sum(1 for r in results if not isinstance(r, BaseException))

    async def _record_rates(self, rates: Rates) -> None:
        op = RecordRatesOp(
            rates.signature,
            rates.gpu_type,
            rates.gpus,
            rates.solo_rate,
            tuple(PairMeasurement(p, shared, ref) for p, shared, ref in rates.pairs),
            self._clock.now(),
        )
        learned: list[LearnedPair] = await self._store.write(op)
        if rates.solo_rate is not None and len(self._known_solo) < MAX_KNOWN_SOLO:
            self._known_solo.add((rates.signature, rates.gpu_type, rates.gpus))
        for lp in learned:
            log.info(
                "learned: %s next to %s on %s runs at %.2fx (measured %.2fx)",
                lp.job_type,
                lp.co_runner,
                lp.gpu_type,
                lp.speed,
                lp.measured,
            )
            self._feed.add(PairObs(lp.job_type, lp.co_runner, lp.gpu_type, lp.speed, lp.reverse))

    async def _record(self, job: Job, attempt: int, acc: _Acc) -> None:
        sig = self.signature(job)
        stats = AttemptStatsRow(
            job.id,
            attempt,
            acc.node,
            sig,
            acc.samples,
            acc.solo_samples,
            acc.util_sum / acc.samples,
            acc.util_peak,
            acc.mem_peak,
            acc.step,
            acc.loss,
            acc.samples_per_s if acc.samples_per_s is None or math.isfinite(acc.samples_per_s) else None,
        )
        profile = None
        if sig and acc.solo_samples:
            profile = await self._fold(sig, acc)
        await self._store.write(RecordAttemptOp(stats, profile))
        if profile is not None:
            self._feed.add(ProfileObs(sig, acc.solo_util_sum / acc.solo_samples, acc.util_peak, acc.mem_peak))

    async def grew(self, job: Job, peak_mib: int) -> None:
        """An attempt of ``job`` was contained for its GPU memory (docs/sharing.md): its workload's
        footprint is at least ``peak_mib`` from now on, stored so that it survives a restart,
        and the next job of its kind is packed by it. Never raises."""
        sig = self.signature(job)
        if not sig or peak_mib <= 0:
            return
        try:
            old = await self._store.read.profile(sig)
            if old is not None and old.mem_mib >= peak_mib:
                return
            prof = self._model.profile_of(sig)
            row = ProfileRow(
                job_type=sig,
                util_avg=old.util_avg if old else prof.util_avg,
                util_peak=old.util_peak if old else prof.util_peak,
                mem_mib=peak_mib,
                samples=old.samples if old else 0,  # (0: only the memory was measured)
                co_speed=old.co_speed if old else {},
                updated_at=self._clock.now(),
            )
            await self._store.write(SaveProfileOp(row))
        except Exception:
            log.exception("learner: could not store the GPU memory peak of %s", sig)
        self._feed.add(MemoryObs(sig, peak_mib))
        log.info("learned: %s needs at least %d MiB of GPU memory", sig, peak_mib)

    async def _fold(self, sig: str, acc: _Acc) -> ProfileRow:
        old = await self._store.read.profile(sig)
        n_old = old.samples if old else 0
        n = n_old + acc.solo_samples
        avg = acc.solo_util_sum / acc.solo_samples
        return ProfileRow(
            job_type=sig,
            util_avg=((old.util_avg * n_old) if old else 0.0) / n + avg * acc.solo_samples / n,
            util_peak=max(old.util_peak if old else 0.0, acc.util_peak),
            mem_mib=max(old.mem_mib if old else 0, acc.mem_peak),
            samples=n,
            co_speed=old.co_speed if old else {},
            updated_at=self._clock.now(),
        )

    # ------------------------------------------------------------------ the model

    async def load(self) -> int:
        """At start-up, before any policy runs: hand the stored profiles and pair speeds to the
        model, so that what was learned survives a restart. Returns the observations applied.
        A table that cannot be read is logged and skipped: the master still starts."""
        read = self._store.read
        try:
            for solo in await read.solo_throughputs(MAX_KNOWN_SOLO):
                self._known_solo.add((solo.job_type, solo.gpu_type, solo.gpus))
        except Exception:
            log.exception("learner: stored solo throughputs unreadable; not used")
        try:
            for p in await read.profiles():
                if p.samples > 0:
                    self._feed.add(ProfileObs(p.job_type, p.util_avg, p.util_peak, p.mem_mib))
                else:  # only a contained attempt's memory peak (grew)
                    self._feed.add(MemoryObs(p.job_type, p.mem_mib))
        except Exception:
            log.exception("learner: stored profiles unreadable; the model starts without them")
        try:
            for obs in pairs_to_observe(await read.pair_speeds()):
                self._feed.add(obs)
        except Exception:
            log.exception("learner: stored pair speeds unreadable; the model starts without them")
        return self.apply_observations()

    def apply_observations(self) -> int:
        """Feed what was measured to the interference model; call only while no policy runs."""
        return self._feed.apply()
