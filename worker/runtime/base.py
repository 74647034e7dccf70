"""The runtime seam: how an attempt runs (a local process or a Docker container)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Protocol

from horus_core.model import JobSpec, JobState


@dataclass(frozen=True, slots=True)
class AttemptKey:
    job_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    key: AttemptKey
    spec: JobSpec
    gpu_uuids: tuple[str, ...]
    log_path: pathlib.Path  # the runtime writes the attempt's stdout+stderr here
    env: tuple[tuple[str, str], ...]  # the final environment additions (HORUS_*, CUDA_VISIBLE_DEVICES, ...)
    # Host paths a container must see, the worker's own (the MPS pipe directory, HAMi's library):
    # (host path, path in the container, read-only). A local process sees the host anyway.
    binds: tuple[tuple[str, str, bool], ...] = ()


@dataclass(frozen=True, slots=True)
class ExitStatus:
    state: JobState  # SUCCEEDED, FAILED or CANCELLED
    exit_code: int | None
    reason: str


class RunningAttempt(Protocol):
    key: AttemptKey

    def pids(self) -> list[int]: ...

    async def wait(self) -> ExitStatus: ...

    async def stop(self, grace_s: float, reason: str) -> None:
        """SIGTERM (or docker stop), then SIGKILL after ``grace_s``; wait() then reports CANCELLED."""
        ...


class Runtime(Protocol):
    name: str

    async def start(self, request: LaunchRequest) -> RunningAttempt: ...

    async def recover(self, log_dir: pathlib.Path) -> list[RunningAttempt]:
        """Attempts left running by a previous life of this worker that can be re-attached."""
        ...

    async def remove_orphans(self, keep: set[AttemptKey]) -> list[AttemptKey]:
        """Stop and remove what this runtime left behind that is not in ``keep``."""
        ...

    async def close(self) -> None: ...
