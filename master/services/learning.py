"""The seam to the interference learner: what running attempts measure, folded into profiles.

Heartbeats (per-attempt GPU use) and progress reports arrive here. While an attempt runs its
samples accumulate in memory; when it ends they are stored (``attempt_stats``), folded into the
profile of its workload signature (``profiles``, from samples where it had its GPUs to itself),
and handed to the interference model when it offers ``observe_profile``.
TODO(learning): pair speeds (``observe_pair``) once progress gives solo vs shared throughput.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from horus_core.gen import worker_pb2 as wpb
from horus_core.model import Job
from master.clock import Clock
from master.store import Store
from master.store.nodes import AttemptStatsRow, ProfileRow, RecordAttemptOp

log = logging.getLogger(__name__)
MAX_TRACKED = 50_000


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


class Learner:
    def __init__(self, store: Store, clock: Clock, model: Any = None) -> None:
        self._store = store
        self._clock = clock
        self._model = model
        self._acc: OrderedDict[tuple[str, int], _Acc] = OrderedDict()
        # Observations for the model wait here: a policy may be reading the model in its thread
        # right now. The scheduler hands them over between passes (apply_observations).
        self._pending: list[tuple[str, float, float, int]] = []

    def _get(self, key: tuple[str, int], node: str) -> _Acc:
        acc = self._acc.get(key)
        if acc is None:
            acc = self._acc[key] = _Acc(node)
            while len(self._acc) > MAX_TRACKED:
                self._acc.popitem(last=False)
        return acc

    def on_heartbeat(self, node: str, hb: wpb.Heartbeat) -> None:
        per_gpu: dict[str, int] = {}
        for s in hb.jobs:
            per_gpu[s.gpu_uuid] = per_gpu.get(s.gpu_uuid, 0) + 1
        grouped: dict[tuple[str, int], list[tuple[float, int, bool]]] = {}
        for s in hb.jobs:
            grouped.setdefault((s.job_id, s.attempt), []).append(
                (s.util_sm, s.mem_used_mib, per_gpu[s.gpu_uuid] == 1)
            )
        for key, readings in grouped.items():
            acc = self._get(key, node)
            util = sum(r[0] for r in readings) / len(readings)
            acc.samples += 1
            acc.util_sum += util
            acc.util_peak = max(acc.util_peak, max(r[0] for r in readings))
            acc.mem_peak = max(acc.mem_peak, max(r[1] for r in readings))
            if all(r[2] for r in readings):
                acc.solo_samples += 1
                acc.solo_util_sum += util

    def on_progress(self, node: str, p: wpb.AttemptProgress) -> None:
        acc = self._get((p.job_id, p.attempt), node)
        acc.step, acc.loss, acc.samples_per_s = p.step, p.loss, p.samples_per_s

    def progress(self, job_id: str, attempt: int) -> tuple[int, float | None, float | None] | None:
        acc = self._acc.get((job_id, attempt))
        return None if acc is None else (acc.step, acc.loss, acc.samples_per_s)

    def signature(self, job: Job) -> str:
        fn = getattr(self._model, "signature", None)
        if fn is not None:
            try:
                return str(fn(job.spec))
            except Exception:
                log.exception("interference model: signature() failed")
        return job.spec.job_type

    async def attempt_ended(self, job: Job, attempt: int) -> None:
        """Store what the attempt measured; update its signature's profile. Never raises."""
        acc = self._acc.pop((job.id, attempt), None)
        if acc is None or acc.samples == 0:
            return
        try:
            await self._record(job, attempt, acc)
        except Exception:
            log.exception("could not record the measurements of %s/%d", job.id, attempt)

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
            acc.samples_per_s,
        )
        profile = None
        if sig and acc.solo_samples:
            profile = await self._fold(sig, acc)
        await self._store.write(RecordAttemptOp(stats, profile))
        if profile is not None and len(self._pending) < MAX_TRACKED:
            self._pending.append((sig, acc.solo_util_sum / acc.solo_samples, acc.util_peak, acc.mem_peak))

    def apply_observations(self) -> int:
        """Feed what was measured to the interference model; call only while no policy runs."""
        todo, self._pending = self._pending, []
        observe = getattr(self._model, "observe_profile", None)
        if observe is None:
            return 0
        for sig, util_avg, util_peak, mem in todo:
            try:
                observe(sig, util_avg, util_peak, mem)
            except Exception:
                log.exception("interference model: observe_profile(%r) failed", sig)
        return len(todo)

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
