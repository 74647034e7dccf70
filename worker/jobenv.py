"""The environment the worker gives every attempt: who it is, where to report, how many GPUs.

One function, :func:`attempt_env`, so every variable a job may read is set in one place. An
elastic job learns its GPU count at every start from ``WORLD_SIZE`` / ``LOCAL_WORLD_SIZE`` (the
PyTorch launcher's names; one process per GPU, all on this node) and ``HORUS_GPUS``.
"""

from __future__ import annotations

from horus_core.progress import PROGRESS_ENV, SPEED_ENV
from horus_core.simgpu import MEMORY_ENV
from worker.files import AttemptFiles
from worker.runtime.base import AttemptKey

Env = tuple[tuple[str, str], ...]


def attempt_env(key: AttemptKey, gpus: tuple[str, ...], files: AttemptFiles, worker: str) -> Env:
    """The worker's variables for attempt ``key`` on ``gpus`` (they override the user's)."""
    count = str(len(gpus))
    return (
        ("CUDA_VISIBLE_DEVICES", ",".join(gpus)),
        ("HORUS_JOB_ID", key.job_id),
        ("HORUS_ATTEMPT", str(key.attempt)),
        (PROGRESS_ENV, str(files.progress)),
        (SPEED_ENV, str(files.speed)),
        (MEMORY_ENV, str(files.gpu_memory)),
        ("HORUS_WORKER", worker),
        ("HORUS_GPUS", count),
        ("WORLD_SIZE", count),
        ("LOCAL_WORLD_SIZE", count),
    )
