"""The GPU probe seam: NVML on a real host, a simulation on a laptop or in CI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from horus_core.model import JobSpec
from horus_core.plane import GpuReading

__all__ = [
    "GpuInfo",
    "GpuProbe",
    "GpuReading",
    "InterferenceLike",
    "ProbeTarget",
    "ProcessReading",
    "Profile",
]


@dataclass(frozen=True, slots=True)
class GpuInfo:
    uuid: str
    index: int
    model: str
    memory_mib: int
    # A MIG instance (docs/sharing.md): its share of the physical GPU's compute and that GPU's
    # UUID; a whole GPU: 1.0 and "".
    compute_fraction: float = 1.0
    parent_uuid: str = ""


@dataclass(frozen=True, slots=True)
class ProcessReading:
    """One process's use of one GPU."""

    pid: int
    gpu_uuid: str
    mem_used_mib: int
    util_sm: float | None = None  # None where NVML gives no per-process samples


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """A running attempt as the probe needs to see it: its processes, GPUs and workload."""

    job_id: str
    attempt: int
    pids: tuple[int, ...]
    gpu_uuids: tuple[str, ...]
    spec: JobSpec
    # Where a stand-in workload writes the GPU memory it would use (``$HORUS_SIM_GPU_MEMORY_FILE``):
    # simulated GPUs read it; "" or absent: the workload's profile.
    memory_file: str = ""


class Profile(Protocol):
    @property
    def util_avg(self) -> float: ...
    @property
    def util_peak(self) -> float: ...
    @property
    def mem_mib(self) -> int: ...


class InterferenceLike(Protocol):
    """The part of ``horus_core.interference.InterferenceModel`` the simulation uses."""

    def enter(self, spec: JobSpec) -> None: ...  # a job starts: its card and hints registered
    def profile(self, spec: JobSpec) -> Profile: ...
    def signature(self, spec: JobSpec) -> str: ...
    def co_speeds(self, signatures: Sequence[str], gpu_type: str) -> tuple[float, ...]: ...


class GpuProbe(Protocol):
    """Implementations run blocking calls in a thread; every method is safe on the event loop."""

    async def gpus(self) -> list[GpuInfo]: ...

    async def read(self, running: Sequence[ProbeTarget]) -> tuple[list[GpuReading], list[ProcessReading]]: ...

    async def memory(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        """Per-process GPU memory only, attributed to the attempts (the memory watchdog reads it
        at least once a second; no utilisation, no events, so no heartbeat reading is taken)."""
        ...

    async def close(self) -> None: ...
