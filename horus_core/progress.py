"""The job-side progress helper: ``report(step, loss=..., samples_per_s=...)`` from inside a training loop.

The worker gives each attempt a file in ``$HORUS_PROGRESS_FILE``; every call appends one JSON line
to it, and the worker forwards the latest one to the master (Optimus and the interference learner
use it). Outside Horus the variable is unset and :func:`report` does nothing, so a training script
can call it unconditionally. Standard library only: jobs import this without grpc.

``speed()`` reads ``$HORUS_SPEED_FILE``: the normalised speed (1.0 = alone on the GPU) that a
simulated GPU grants the job right now; stand-in workloads sleep accordingly. 1.0 when unset.
"""

from __future__ import annotations

import json
import math
import os
import time

PROGRESS_ENV = "HORUS_PROGRESS_FILE"
SPEED_ENV = "HORUS_SPEED_FILE"

__all__ = ["PROGRESS_ENV", "SPEED_ENV", "report", "speed"]


def report(step: int, loss: float | None = None, samples_per_s: float | None = None) -> None:
    """Append ``{"step", "loss", "samples_per_s", "at"}`` to ``$HORUS_PROGRESS_FILE`` (no-op when unset)."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    record: dict[str, float | int] = {"step": int(step), "at": time.time()}
    if loss is not None and math.isfinite(loss):
        record["loss"] = float(loss)
    if samples_per_s is not None and math.isfinite(samples_per_s):
        record["samples_per_s"] = float(samples_per_s)
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    # One O_APPEND write per line: a reader never sees two records interleaved.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def speed(default: float = 1.0) -> float:
    """The current normalised speed from ``$HORUS_SPEED_FILE``; ``default`` if unset or unreadable."""
    path = os.environ.get(SPEED_ENV)
    if not path:
        return default
    try:
        with open(path, encoding="ascii") as fh:
            value = float(fh.read().strip() or "nan")
    except (OSError, ValueError):
        return default
    return value if math.isfinite(value) and value > 0 else default
