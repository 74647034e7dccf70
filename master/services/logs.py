"""Attempt logs on disk: ``<data-dir>/logs/<job_id>/<attempt>.log``, appended by offset. A
multi-node gang's parts other than rank 0 each have their own, ``<attempt>@<node>.log``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import re

log = logging.getLogger(__name__)

JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # (as master.services.workers.NODE_NAME)
CHUNK = 64 * 1024


class LogStore:
    def __init__(self, root: pathlib.Path, max_bytes: int = 1 << 30) -> None:
        self.root = root
        self._max = max_bytes
        self._sizes: dict[tuple[str, int, str], int] = {}
        self._waiters: dict[str, asyncio.Event] = {}

    def path(self, job_id: str, attempt: int, node: str = "") -> pathlib.Path:
        if not JOB_ID.match(job_id) or attempt < 1 or (node and not _NODE.match(node)):
            raise ValueError(f"bad log key {job_id!r}/{attempt}/{node!r}")
        return self.root / job_id / (f"{attempt}@{node}.log" if node else f"{attempt}.log")

    def parts(self, job_id: str, attempt: int) -> list[str]:
        """The nodes of a gang attempt's parts that have their own log (rank 0's is the plain one)."""
        prefix = f"{attempt}@"
        try:
            names = os.listdir(self.path(job_id, attempt).parent)
        except FileNotFoundError:
            return []
        return sorted(n[len(prefix) : -4] for n in names if n.startswith(prefix) and n.endswith(".log"))

    def size(self, job_id: str, attempt: int, node: str = "") -> int:
        key = (job_id, attempt, node)
        if key not in self._sizes:
            if len(self._sizes) > 100_000:
                self._sizes.clear()  # a cache only: sizes are re-read from disk
            try:
                self._sizes[key] = os.path.getsize(self.path(job_id, attempt, node))
            except FileNotFoundError:
                return 0
        return self._sizes[key]

    def append(self, job_id: str, attempt: int, offset: int, data: bytes, node: str = "") -> bool:
        """Append ``data`` if it starts exactly at the end of the file; duplicates and gaps are dropped.

        Synchronous on purpose: no await between the offset check and the write.
        """
        size = self.size(job_id, attempt, node)
        if offset != size or not data:
            return False
        if size + len(data) > self._max:
            log.warning("log of %s/%d exceeds %d bytes; dropping the rest", job_id, attempt, self._max)
            return False
        path = self.path(job_id, attempt, node)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:
            f.write(data)
        self._sizes[(job_id, attempt, node)] = size + len(data)
        self.wake(job_id)
        return True

    def read(self, job_id: str, attempt: int, offset: int, limit: int = CHUNK, node: str = "") -> bytes:
        try:
            with open(self.path(job_id, attempt, node), "rb") as f:
                f.seek(offset)
                return f.read(limit)
        except FileNotFoundError:
            return b""

    def forget(self, job_id: str, attempt: int, node: str = "") -> None:
        """Drop the cached size of a finished attempt (the file stays)."""
        self._sizes.pop((job_id, attempt, node), None)

    def wake(self, job_id: str) -> None:
        ev = self._waiters.pop(job_id, None)
        if ev is not None:
            ev.set()

    async def wait(self, job_id: str, at_most_s: float) -> None:
        """Until the job's log grows or its state changes (see :meth:`wake`), at most ``at_most_s``."""
        ev = self._waiters.setdefault(job_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), at_most_s)
