"""The sharing modes of a worker (``horus-worker --sharing``) and the exact environment each gives a
job that shares a GPU (pure; docs/sharing.md).

- ``timeslice`` (the default): CUDA's own time-slicing between processes; the memory cap is held
  by the worker's NVML watchdog alone. Needs nothing on the host, isolates faults like separate
  processes do.
- ``mps``: NVIDIA MPS. Each GPU that runs two jobs or more gets its own control daemon (the
  worker's :mod:`worker.sharing.mps`); a job started while one runs is its client, with
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` set to its cap and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
  to its share of the SMs. MPS clients share one server: a fatal fault in one can end the others.
- ``hami``: HAMi-core's CUDA hook library, installed by the operator (``--hami-lib PATH``),
  preloaded into the job with ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` and ``CUDA_DEVICE_SM_LIMIT``. The
  memory limit holds only for allocations made through the hooked CUDA libraries; the SM limit is
  a soft throttle.

In every mode the job also gets ``HORUS_GPU_MEMORY_CAP_MIB`` (its cap, so it can size itself) and
``HORUS_SHARING`` (the mode), and the worker's watchdog stops it above its cap plus slack.
"""

from __future__ import annotations

import enum
import math
import pathlib
from dataclasses import dataclass

Env = tuple[tuple[str, str], ...]
CAP_ENV = "HORUS_GPU_MEMORY_CAP_MIB"
MODE_ENV = "HORUS_SHARING"
MAX_PER_GPU = 3  # the most jobs a policy puts on one GPU


class Sharing(enum.Enum):
    TIMESLICE = "timeslice"
    MPS = "mps"
    HAMI = "hami"


DEFAULT = Sharing.TIMESLICE


@dataclass(frozen=True, slots=True)
class Limits:
    """One attempt's limits: its cap per GPU (0: none), its share of each GPU's SMs (%), and how
    many GPUs it sees (device indices 0..gpus-1 inside the job)."""

    cap_mib: int
    share_pct: int
    gpus: int


def share_pct(jobs_on_gpu: int) -> int:
    """A job's share of the SMs when it starts as one of ``jobs_on_gpu`` jobs on its GPU: an even
    split (100, 50, 34), never below 1/MAX_PER_GPU."""
    return math.ceil(100 / max(1, min(MAX_PER_GPU, jobs_on_gpu)))


def common_env(mode: Sharing, cap_mib: int) -> Env:
    """What every job gets, whatever the mode."""
    return ((MODE_ENV, mode.value), (CAP_ENV, str(max(0, cap_mib))))


def mps_env(pipe_dir: pathlib.Path, limits: Limits) -> Env:
    """A client of the MPS daemon listening in ``pipe_dir``: its pinned memory limit per device
    (``0=4096M``) and its active thread percentage."""
    env: list[tuple[str, str]] = [("CUDA_MPS_PIPE_DIRECTORY", str(pipe_dir))]
    if limits.cap_mib > 0:
        per_device = ",".join(f"{i}={limits.cap_mib}M" for i in range(max(1, limits.gpus)))
        env.append(("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", per_device))
    env.append(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", str(limits.share_pct)))
    return tuple(env)


def hami_env(lib: pathlib.Path, cache: pathlib.Path, limits: Limits) -> Env:
    """HAMi-core's documented variables: the hook preloaded, a memory limit per device index
    (``1024m``), the SM percentage, and a cache file of the attempt's own (HAMi keeps the
    limits it read there; a file per attempt never carries one job's limits to the next)."""
    env: list[tuple[str, str]] = [("LD_PRELOAD", str(lib))]
    if limits.cap_mib > 0:
        env += [(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", f"{limits.cap_mib}m") for i in range(max(1, limits.gpus))]
    env += [("CUDA_DEVICE_SM_LIMIT", str(limits.share_pct)), ("CUDA_DEVICE_MEMORY_SHARED_CACHE", str(cache))]
    return tuple(env)
