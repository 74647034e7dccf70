"""Where an attempt's files live on the worker: ``<state-dir>/attempts/<job>/<attempt>/``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import json_format

from horus_core.gen import types_pb2
from horus_core.model import JobSpec
from horus_core.wire import spec_from_pb, spec_to_pb
from worker.runtime.base import AttemptKey

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """A file-name-safe form of an id from the wire (no separators, no leading dot)."""
    cleaned = _UNSAFE.sub("_", text)[:200]
    return cleaned if cleaned and not cleaned.startswith(".") else f"_{cleaned}"


def attempts_dir(state_dir: pathlib.Path) -> pathlib.Path:
    return state_dir / "attempts"


@dataclass(frozen=True, slots=True)
class AttemptFiles:
    dir: pathlib.Path
    log: pathlib.Path  # stdout + stderr
    progress: pathlib.Path  # $HORUS_PROGRESS_FILE: JSON lines
    speed: pathlib.Path  # $HORUS_SPEED_FILE: the normalised speed granted now (simulated GPUs)
    meta: pathlib.Path  # the assignment (spec, GPUs), for an attempt a runtime re-attaches later
    gpu_memory: pathlib.Path  # $HORUS_SIM_GPU_MEMORY_FILE: what a stand-in workload uses (simulated GPUs)

    @classmethod
    def of(cls, state_dir: pathlib.Path, key: AttemptKey) -> AttemptFiles:
        d = attempts_dir(state_dir) / safe_name(key.job_id) / str(key.attempt)
        return cls(
            d, d / "output.log", d / "progress.jsonl", d / "speed", d / "assignment.json", d / "gpu-memory"
        )

    def prepare(self, spec: JobSpec, gpus: tuple[str, ...]) -> None:
        """Blocking. A fresh directory: files of an earlier life of the same attempt are removed."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for path in (self.log, self.progress, self.gpu_memory):
            path.unlink(missing_ok=True)
        self.write_speed(1.0)
        record = {"gpus": list(gpus), "spec": json_format.MessageToDict(spec_to_pb(spec))}
        self.meta.write_text(json.dumps(record))

    def load_assignment(self) -> tuple[JobSpec, tuple[str, ...]] | None:
        """Blocking. What :meth:`prepare` recorded; None if absent or unreadable."""
        try:
            record = json.loads(self.meta.read_text())
            spec = spec_from_pb(json_format.ParseDict(record["spec"], types_pb2.JobSpec()))
            return spec, tuple(str(g) for g in record["gpus"])
        except (OSError, ValueError, KeyError, TypeError, json_format.ParseError):
            return None

    def write_speed(self, speed: float) -> None:
        """Blocking; atomic (a reader never sees a half-written number)."""
        tmp = self.speed.with_name(".speed.tmp")
        tmp.write_text(f"{speed:.4f}\n", encoding="ascii")
        os.replace(tmp, self.speed)


def write_speeds(speeds: Sequence[tuple[AttemptFiles, float]]) -> None:
    """Blocking: each attempt's granted speed (a file that cannot be written is skipped)."""
    for files, speed in speeds:
        with contextlib.suppress(OSError):
            files.write_speed(speed)


def load_epoch(state_dir: pathlib.Path) -> int:
    """The epoch of this node's last registration, kept across restarts of the daemon."""
    try:
        return int((state_dir / "epoch").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def save_epoch(state_dir: pathlib.Path, epoch: int) -> None:
    try:
        (state_dir / "epoch").write_text(str(epoch))
    except OSError as exc:
        log.warning("cannot record the registration epoch: %s", exc)
