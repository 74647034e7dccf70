"""Read queries, on a small pool of connections of their own (WAL lets them run beside the writer).

Read-your-writes: each query takes a connection no other query is using, and in autocommit mode
its statement opens a fresh read transaction, so it sees every write committed (acknowledged)
before it started. (One shared connection did not: a query started while another statement was
still open on it read that statement's older snapshot.)

A stored job row that cannot be decoded never stops the reads of the others: it reads back as
FAILED (:func:`master.store.rows.unreadable_row`), a scheduling pass skips it, and ``on_bad`` is
told once per job so the store can mark it FAILED for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiosqlite

from horus_core.model import Gpu, JobState, NodeState
from master.store.dialect import limit as sql_limit
from master.store.dialect import lists_node, select_jobs
from master.store.learned import PairRow, SoloRow
from master.store.nodes import ProfileRow
from master.store.rows import JobRow, gpus_from_json, job_rows_from_json

log = logging.getLogger(__name__)
BadRow = Callable[[str, str], None]  # (job id, why) of a row that cannot be decoded


@dataclass(frozen=True)
class NodeRow:
    name: str
    gpus: tuple[Gpu, ...]
    state: NodeState
    version: str
    registered_at: float
    last_seen: float
    rack: str = ""


_BIG = 256 * 1024  # bytes of JSON


class Pool(Protocol):
    """Where reads run: SQLite's :class:`ReaderPool` or PostgreSQL's (:mod:`master.store.pgstore`).
    Rows index by position and by column name."""

    pg: bool

    async def all(self, sql: str, params: Sequence[object]) -> list[Any]: ...

    async def one(self, sql: str, params: Sequence[object]) -> Any: ...

    async def close(self) -> None: ...


class ReaderPool:
    """Read connections lent to one query at a time."""

    pg = False

    def __init__(self, conns: Sequence[aiosqlite.Connection]) -> None:
        self._all = list(conns)
        self._idle: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        for c in conns:
            self._idle.put_nowait(c)

    @contextlib.asynccontextmanager
    async def conn(self) -> AsyncIterator[aiosqlite.Connection]:
        c = await self._idle.get()
        try:
            yield c
        finally:
            self._idle.put_nowait(c)

    async def all(self, sql: str, params: Sequence[object]) -> list[Any]:
        async with self.conn() as conn, conn.execute(sql, tuple(params)) as cur:
            return list(await cur.fetchall())

    async def one(self, sql: str, params: Sequence[object]) -> Any:
        async with self.conn() as conn, conn.execute(sql, tuple(params)) as cur:
            return await cur.fetchone()

    async def close(self) -> None:
        for c in self._all:
            await c.close()


class Reader:
    def __init__(self, pool: Pool, on_bad: BadRow | None = None) -> None:
        self._pool = pool
        self.pg = pool.pg  # PostgreSQL (its SQL spellings: master.store.dialect)
        self._on_bad = on_bad
        self._reported: set[str] = set()

    async def _all(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        return await self._pool.all(sql, params)

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """Rows of a read-only query, for the store modules that own their tables' SQL."""
        return await self._all(sql, params)

    async def _one(self, sql: str, params: Sequence[object] = ()) -> Any:
        return await self._pool.one(sql, params)

    def _report(self, rows: Iterable[JobRow]) -> None:
        for r in rows:
            job_id = r.job.id
            if r.unreadable and job_id not in self._reported:
                self._reported.add(job_id)
                log.error("job %s: stored row unreadable (%s); it reads as FAILED", job_id, r.unreadable)
                if self._on_bad is not None:
                    self._on_bad(job_id, r.unreadable)

    async def _jobs(self, where: str, params: Sequence[object]) -> list[JobRow]:
        row = await self._one(select_jobs(where, pg=self.pg), params)
        text = row[0] if row else None
        if text is not None and len(text) > _BIG:
            # Thousands of rows: decode beside the loop, which keeps serving in the meantime.
            rows = await asyncio.to_thread(job_rows_from_json, text)
        else:
            rows = job_rows_from_json(text)
        self._report(rows)
        return rows

    async def job(self, job_id: str) -> JobRow | None:
        rows = await self._jobs("WHERE id = ?", (job_id,))
        return rows[0] if rows else None

    async def list_jobs(
        self,
        states: Sequence[JobState],
        owner: str | None,
        after_seq: int,
        limit: int,
        finished_since: float | None = None,
    ) -> list[JobRow]:
        """Jobs after ``after_seq`` in ``states`` (all when empty) and, with ``finished_since``,
        also those that ended at or after it, whatever their state."""
        clauses = ["seq > ?"]
        params: list[object] = [after_seq]
        if states:
            wanted = f"state IN ({','.join('?' * len(states))})"
            params.extend(s.value for s in states)
            if finished_since is not None:
                wanted = f"({wanted} OR finished_at >= ?)"
                params.append(finished_since)
            clauses.append(wanted)
        if owner is not None:
            clauses.append("owner = ?")
            params.append(owner)
        params.append(limit)
        return await self._jobs(f"WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?", params)

    async def recent_jobs(self, owner: str | None, limit: int) -> list[JobRow]:
        """The latest ``limit`` jobs (of ``owner``; None: everyone's), newest first."""
        where, params = ("WHERE owner = ?", [owner]) if owner is not None else ("", [])
        rows = await self._jobs(f"{where} ORDER BY seq DESC LIMIT ?", [*params, limit])
        return sorted(rows, key=lambda r: -r.seq)  # (the JSON aggregate need not keep the order)

    async def last_requeue(self, job_id: str) -> tuple[float, str] | None:
        """When and why an attempt of the job last stopped with the job going back to PENDING
        (a preemption, a drain, a reclaim, a lost node): the job's events keep it."""
        rows = await self._all(
            "SELECT at, reason FROM job_events WHERE job_id = ? AND to_state = 'PENDING'"
            " AND from_state IN ('ASSIGNED', 'RUNNING') ORDER BY id DESC LIMIT 1",
            (job_id,),
        )
        return (float(rows[0][0]), str(rows[0][1])) if rows else None

    async def live_jobs(self) -> list[JobRow]:
        """Pending and active jobs, in submission order: what the master's live index
        (:mod:`master.store.live`) is built from at start."""
        rows = await self._jobs("WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING') ORDER BY seq", ())
        return [r for r in rows if not r.unreadable]  # (reported and quarantined by _jobs)

    async def pending_by_reason(self) -> list[tuple[str, int]]:
        """Pending jobs counted by reason, digits replaced by ``#`` so that reasons differing only
        in their numbers ("queued behind 12 jobs") count together (metrics, dashboard)."""
        masked = "reason"
        for d in "0123456789":
            masked = f"replace({masked}, '{d}', '#')"
        sql = f"SELECT {masked} AS r, COUNT(*) FROM jobs WHERE state = 'PENDING' GROUP BY r"
        return [(str(r[0]), int(r[1])) for r in await self._all(sql)]

    async def active_jobs(self, node: str | None = None) -> list[JobRow]:
        if node is None:
            return await self._jobs("WHERE state IN ('ASSIGNED', 'RUNNING') ORDER BY seq", ())
        # (the literal state list lets SQLite use the partial index jobs_by_node; a multi-node
        # gang is on ``node`` when it is one of its ``nodes``)
        return await self._jobs(
            "WHERE state IN ('ASSIGNED', 'RUNNING') AND (node = ? OR (nodes != '[]'"
            f" AND {lists_node('jobs.nodes', pg=self.pg)})) ORDER BY seq",
            (node, node),
        )

    async def count_jobs(self) -> int:
        row = await self._one("SELECT COUNT(*) FROM jobs")
        return int(row[0]) if row else 0

    async def attempt_node(self, job_id: str, attempt: int) -> str | None:
        """The node an attempt was assigned to (from the job's history), None if never assigned."""
        row = await self._one(
            "SELECT node FROM job_events WHERE job_id = ? AND attempt = ? AND to_state = 'ASSIGNED' LIMIT 1",
            (job_id, attempt),
        )
        return str(row[0]) if row else None

    async def nodes(self) -> list[NodeRow]:
        rows = await self._all(
            "SELECT name, gpus, state, version, registered_at, last_seen, rack FROM nodes ORDER BY name"
        )
        return [
            NodeRow(
                r["name"],
                gpus_from_json(r["gpus"], r["name"]),
                NodeState(r["state"]),
                r["version"],
                r["registered_at"],
                r["last_seen"],
                r["rack"],
            )
            for r in rows
        ]

    async def profiles(self, job_type: str | None = None, limit: int = -1) -> list[ProfileRow]:
        where, params = ("WHERE job_type = ?", (job_type,)) if job_type is not None else ("", ())
        rows = await self._all(
            "SELECT job_type, util_avg, util_peak, mem_mib, samples, co_speed, updated_at FROM profiles"
            f" {where} ORDER BY job_type {sql_limit(limit)}",
            params,
        )
        return [
            ProfileRow(
                r["job_type"],
                r["util_avg"],
                r["util_peak"],
                r["mem_mib"],
                r["samples"],
                {str(k): float(v) for k, v in json.loads(r["co_speed"]).items()},
                r["updated_at"],
            )
            for r in rows
        ]

    async def profile(self, job_type: str) -> ProfileRow | None:
        rows = await self.profiles(job_type)
        return rows[0] if rows else None

    async def solo_throughputs(self, limit: int = -1) -> list[SoloRow]:
        rows = await self._all(
            "SELECT job_type, gpu_type, gpus, samples_per_s, samples, updated_at FROM solo_throughputs"
            f" ORDER BY job_type, gpu_type, gpus {sql_limit(limit)}"
        )
        return [
            SoloRow(
                r["job_type"], r["gpu_type"], r["gpus"], r["samples_per_s"], r["samples"], r["updated_at"]
            )
            for r in rows
        ]

    async def pair_speeds(self, limit: int = -1) -> list[PairRow]:
        """Measured pair speeds, one row per direction (``limit`` -1: all)."""
        rows = await self._all(
            "SELECT job_type, co_runner, gpu_type, speed, samples, updated_at FROM pair_speeds"
            f" ORDER BY job_type, co_runner, gpu_type {sql_limit(limit)}"
        )
        return [
            PairRow(r["job_type"], r["co_runner"], r["gpu_type"], r["speed"], r["samples"], r["updated_at"])
            for r in rows
        ]
