"""Which jobs are over their GPU memory cap, from NVML's per-process readings (pure).

A job's cap covers everything NVML counts for its processes on one GPU (CUDA context included),
summed per GPU by the probe's attribution (:func:`worker.gpu.proctree.attribute`). A job is over
its cap when that sum exceeds the cap plus a slack that absorbs the allocator's rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from worker.gpu.base import ProcessReading

DEFAULT_SLACK_MIB = 256


@dataclass(frozen=True, slots=True)
class MemoryCap:
    """One running attempt's cap on each GPU it uses."""

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


def breaches(
    caps: Iterable[MemoryCap], readings: Sequence[ProcessReading], slack_mib: int = DEFAULT_SLACK_MIB
) -> list[Breach]:
    """The attempts above ``cap + slack`` on some GPU, at most one breach each (the largest)."""
    owner = {pid: cap for cap in caps for pid in cap.pids}
    worst: dict[tuple[str, int], Breach] = {}
    for r in readings:
        cap = owner.get(r.pid)
        if cap is None or r.mem_used_mib <= cap.cap_mib + slack_mib:
            continue
        key = (cap.job_id, cap.attempt)
        if key not in worst or r.mem_used_mib > worst[key].used_mib:
            worst[key] = Breach(cap, r.gpu_uuid, r.mem_used_mib)
    return list(worst.values())
