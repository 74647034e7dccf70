"""OOM containment (issue 31, docs/sharing.md): what an attempt that ended for its GPU memory
means for its job (pure).

The worker names the cause of such an ending: its memory watchdog stopped the attempt above its
cap (``GpuMemoryExceeded``), or the job exited non-zero with CUDA's out-of-memory error in its
log (``CudaOutOfMemory``); with it come the attempt's measured peak on any one GPU, whether
another attempt shared one of its GPUs meanwhile, and whether the watchdog saw such a neighbour
above its own cap. The rules:

- **A neighbour** that ran out of memory while another attempt on its GPU was over its cap was
  killed by someone else's growth: it runs again as it was, without penalty.
- **The grower** (stopped by the watchdog, or out of memory while sharing with no neighbour over
  its cap: under MPS or HAMi-core its own limit refused it) is re-queued once to run alone: its
  GPUs to itself, with its measured peak (at least its cap) plus the margin as its new cap
  (:func:`horus_core.caps.raised`). It is not counted as its own failure. The job stays alone
  from then on, so it is never contained twice: a job with its GPUs to itself that runs out of
  memory has failed.
- Out of memory **alone** (not sharing): the job's own failure; the update stands.
"""

from __future__ import annotations

from dataclasses import dataclass

from horus_core import reasoncodes as rc
from horus_core.caps import format_mib, raised
from horus_core.model import Job

CAUSE_GPU_MEMORY_EXCEEDED = "GpuMemoryExceeded"
CAUSE_CUDA_OOM = "CudaOutOfMemory"
CAUSES = frozenset({CAUSE_GPU_MEMORY_EXCEEDED, CAUSE_CUDA_OOM})


@dataclass(frozen=True, slots=True)
class Ending:
    """What the worker knows of how an attempt ended, beyond its state (AttemptUpdate)."""

    cause: str = ""
    peak_mib: int = 0
    shared: bool = False
    neighbour_over: bool = False  # another attempt on its GPUs was seen above its cap


@dataclass(frozen=True, slots=True)
class Contained:
    """Re-queue the job: ``alone_mib`` > 0 runs it alone with that cap from now on (the
    grower); 0 runs it again as it was (a neighbour)."""

    alone_mib: int
    reason: str
    code: str


def contain(job: Job, ending: Ending) -> Contained | None:
    """The re-queue an ending calls for, or None (the update stands as reported)."""
    if ending.cause not in CAUSES or job.spec.exclusive:
        return None
    cap, peak, n = job.gpu_memory_cap_mib, ending.peak_mib, job.attempt
    if ending.cause == CAUSE_CUDA_OOM and not ending.shared:
        return None
    if ending.cause == CAUSE_GPU_MEMORY_EXCEEDED or not ending.neighbour_over:
        new_cap = raised(cap, peak)
        how = (
            "stopped by the GPU memory watchdog"
            if ending.cause == CAUSE_GPU_MEMORY_EXCEEDED
            else "ran out of GPU memory"
        )
        return Contained(
            new_cap,
            f"{CAUSE_GPU_MEMORY_EXCEEDED}: attempt {n} {how} at {format_mib(peak)} (cap "
            f"{format_mib(cap)}); re-queued to run alone with cap {format_mib(new_cap)}",
            rc.GPU_MEMORY_EXCEEDED,
        )
    return Contained(
        0,
        f"attempt {n} ran out of GPU memory at {format_mib(peak)} (cap {format_mib(cap)}) while a "
        "job sharing its GPU was over its own cap: a neighbour grew; re-queued without penalty",
        rc.PREEMPTED,
    )
