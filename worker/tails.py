"""Following an attempt's files as they grow: its output log (pushed by offset in chunks of at most
64 KiB) and its progress file (JSON lines from :mod:`horus_core.progress`). Reads are blocking:
call :meth:`LogTail.read` and :meth:`ProgressTail.read` in a thread."""

from __future__ import annotations

import collections
import json
import math
import os
import pathlib
from collections.abc import Sequence

from worker import messages
from worker.messages import Progress
from worker.runtime.base import AttemptKey

CHUNK = 64 * 1024
REPLAY_CHUNKS = 16  # chunks sent again after a reconnect: those may have died with the old stream
MAX_PROGRESS_READ = 1 << 20


class LogTail:
    """Chunks of a growing file, each ``(offset, data)``.

    The master appends a chunk only when its offset equals the size it has, and drops the rest.
    After a (re)registration the last :data:`REPLAY_CHUNKS` chunks are sent again with exactly the
    same boundaries, so whatever the master is missing of them it accepts, then new ones follow.
    """

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.sent = 0
        self._recent: collections.deque[tuple[int, int]] = collections.deque(maxlen=REPLAY_CHUNKS)
        self._rewind = False

    def rewind(self) -> None:
        """Ask the next :meth:`read` to send the recent chunks again (safe from another thread)."""
        self._rewind = True

    def read(self, max_new: int = 4) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        try:
            with open(self.path, "rb") as fh:
                if self._rewind:
                    self._rewind = False
                    for start, end in list(self._recent):
                        fh.seek(start)
                        out.append((start, fh.read(end - start)))
                size = os.fstat(fh.fileno()).st_size
                for _ in range(max_new):
                    if self.sent >= size:
                        break
                    fh.seek(self.sent)
                    data = fh.read(min(CHUNK, size - self.sent))
                    if not data:
                        break
                    self._recent.append((self.sent, self.sent + len(data)))
                    out.append((self.sent, data))
                    self.sent += len(data)
        except FileNotFoundError:
            return out
        return out

    def pending(self) -> bool:
        try:
            return self._rewind or self.path.stat().st_size > self.sent
        except OSError:
            return False


class ProgressTail:
    """The latest complete, valid JSON line appended since the last read (older ones are skipped:
    the master keeps only the latest per attempt)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read(self) -> Progress | None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(MAX_PROGRESS_READ)
        except FileNotFoundError:
            return None
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-MAX_PROGRESS_READ:]
        for line in reversed(lines):
            parsed = parse_progress(line)
            if parsed is not None:
                return parsed
        return None


def parse_progress(line: bytes) -> Progress | None:
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            return None
        step = int(record["step"])
        loss = float(record.get("loss", 0.0))
        rate = float(record.get("samples_per_s", 0.0))
        at = float(record.get("at", 0.0))
    except (ValueError, KeyError, TypeError, OverflowError):
        return None
    if not all(math.isfinite(v) for v in (loss, rate, at)):
        return None
    return Progress(step=step, loss=loss, samples_per_s=rate, at=at)


def read_tails(
    logs: Sequence[tuple[AttemptKey, LogTail]], progress: Sequence[tuple[AttemptKey, ProgressTail]]
) -> list[messages.Outgoing]:
    """Blocking: new log chunks and the latest progress of each attempt, as messages."""
    out = [messages.log_chunk(key, off, data) for key, tail in logs for off, data in tail.read()]
    for key, ptail in progress:
        latest = ptail.read()
        if latest is not None:
            out.append(messages.progress(key, latest))
    return out
