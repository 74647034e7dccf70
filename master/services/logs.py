"""Attempt logs, appended by offset: on disk for a lone SQLite master
(``<data-dir>/logs/<job_id>/<attempt>.log``; a multi-node gang's parts other than rank 0 each have
their own, ``<attempt>@<node>.log``), in the database for masters on PostgreSQL
(:class:`DbLogStore`: every master reads what the leader of the moment stored, issue 39)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import re
from typing import TYPE_CHECKING

from master.store.logs import AppendLogOp, log_parts, log_read, log_size

if TYPE_CHECKING:
    from master.store import Store

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

    async def parts(self, job_id: str, attempt: int) -> list[str]:
        """The nodes of a gang attempt's parts that have their own log (rank 0's is the plain one)."""
        prefix = f"{attempt}@"
        try:
            names = os.listdir(self.path(job_id, attempt).parent)
        except FileNotFoundError:
            return []
        return sorted(n[len(prefix) : -4] for n in names if n.startswith(prefix) and n.endswith(".log"))

    async def size(self, job_id: str, attempt: int, node: str = "") -> int:
        return self._file_size(job_id, attempt, node)

    def _file_size(self, job_id: str, attempt: int, node: str) -> int:
        key = (job_id, attempt, node)
        if key not in self._sizes:
            if len(self._sizes) > 100_000:
                self._sizes.clear()  # a cache only: sizes are re-read from disk
            try:
                self._sizes[key] = os.path.getsize(self.path(job_id, attempt, node))
            except FileNotFoundError:
                return 0
        return self._sizes[key]

    async def append(self, job_id: str, attempt: int, offset: int, data: bytes, node: str = "") -> bool:
        """Append ``data`` if it starts exactly at the end of the file; duplicates and gaps are dropped.

        No await between the offset check and the write (small local writes, on the loop as before).
        """
        return self._append_file(job_id, attempt, offset, data, node)

    def _append_file(self, job_id: str, attempt: int, offset: int, data: bytes, node: str) -> bool:
        size = self._file_size(job_id, attempt, node)
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

    async def read(self, job_id: str, attempt: int, offset: int, limit: int = CHUNK, node: str = "") -> bytes:
        return self._read_file(job_id, attempt, offset, limit, node)

    def _read_file(self, job_id: str, attempt: int, offset: int, limit: int, node: str) -> bytes:
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


class DbLogStore(LogStore):
    """The logs as rows of the store (:mod:`master.store.logs`): appended by the leader's writer
    (fenced: a deposed leader appends nothing), read by any master."""

    def __init__(self, store: Store, max_bytes: int = 1 << 30) -> None:
        super().__init__(pathlib.Path("."), max_bytes)
        self.store = store
        self._full: set[tuple[str, int, str]] = set()

    async def parts(self, job_id: str, attempt: int) -> list[str]:
        return await log_parts(self.store.read, job_id, attempt)

    async def size(self, job_id: str, attempt: int, node: str = "") -> int:
        return await log_size(self.store.read, job_id, attempt, node)

    async def append(self, job_id: str, attempt: int, offset: int, data: bytes, node: str = "") -> bool:
        self.path(job_id, attempt, node)  # (checks the key)
        done = await self.store.write(AppendLogOp(job_id, attempt, node, offset, data, self._max))
        if done:
            self.wake(job_id)
            return True
        key = (job_id, attempt, node)
        if data and key not in self._full and await self.size(*key) + len(data) > self._max:
            self._full.add(key)
            log.warning("log of %s/%d exceeds %d bytes; dropping the rest", job_id, attempt, self._max)
        return done

    async def read(self, job_id: str, attempt: int, offset: int, limit: int = CHUNK, node: str = "") -> bytes:
        return await log_read(self.store.read, job_id, attempt, offset, limit, node)

    def forget(self, job_id: str, attempt: int, node: str = "") -> None:
        self._full.discard((job_id, attempt, node))
