"""Which jobs are over their GPU memory cap, from NVML's per-process readings (pure).

A job's cap covers everything NVML counts for its processes on one GPU (CUDA context included):
the probe attributes each GPU process to an attempt's PID (:func:`worker.gpu.proctree.attribute`),
and :func:`usage` sums them per attempt and GPU (a job with several processes on one GPU counts
them all). A job is over its cap when that sum exceeds the cap plus a slack that absorbs the
allocator's rounding. :class:`Peaks` keeps each attempt's largest use on any one GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from worker.gpu.base import ProcessReading

DEFAULT_SLACK_MIB = 256
Key = tuple[str, int]  # (job id, attempt)


@dataclass(frozen=True, slots=True)
class MemoryCap:
    """One running attempt's cap on each GPU it uses (``cap_mib`` 0: no cap, only measured)."""

    job_id: str
    attempt: int
    pids: tuple[int, ...]
    cap_mib: int


@dataclass(frozen=True, slots=True)
class Breach:
    """An attempt seen above its cap plus slack on one GPU."""

    cap: MemoryCap
    gpu_uuid: str
    used_mib: int


def usage(caps: Iterable[MemoryCap], readings: Sequence[ProcessReading]) -> dict[Key, dict[str, int]]:
    """MiB per attempt and GPU: the readings of its PIDs summed (processes no attempt names are
    left out)."""
    owner = {pid: (cap.job_id, cap.attempt) for cap in caps for pid in cap.pids}
    out: dict[Key, dict[str, int]] = {}
    for r in readings:
        key = owner.get(r.pid)
        if key is not None:
            per_gpu = out.setdefault(key, {})
            per_gpu[r.gpu_uuid] = per_gpu.get(r.gpu_uuid, 0) + max(0, r.mem_used_mib)
    return out


def breaches(
    caps: Iterable[MemoryCap], readings: Sequence[ProcessReading], slack_mib: int = DEFAULT_SLACK_MIB
) -> list[Breach]:
    """The attempts above ``cap + slack`` on some GPU, at most one breach each (the largest)."""
    capped = [c for c in caps if c.cap_mib > 0]
    by_key = {(c.job_id, c.attempt): c for c in capped}
    out: list[Breach] = []
    for key, per_gpu in usage(capped, readings).items():
        cap = by_key[key]
        gpu, used = max(per_gpu.items(), key=lambda kv: (kv[1], kv[0]))
        if used > cap.cap_mib + slack_mib:
            out.append(Breach(cap, gpu, used))
    return out


class Peaks:
    """Each attempt's largest use of any one GPU, as read (MiB)."""

    def __init__(self) -> None:
        self._peak: dict[Key, int] = {}

    def observe(self, used: dict[Key, dict[str, int]]) -> None:
        for key, per_gpu in used.items():
            top = max(per_gpu.values(), default=0)
            if top > self._peak.get(key, 0):
                self._peak[key] = top

    def of(self, key: Key) -> int:
        return self._peak.get(key, 0)

    def pop(self, key: Key) -> int:
        return self._peak.pop(key, 0)
