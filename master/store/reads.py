"""Read queries, on a connection of their own (WAL lets them run beside the writer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite

from horus_core.model import Gpu, JobState, NodeState
from master.store.learned import PairRow, SoloRow
from master.store.nodes import ProfileRow
from master.store.rows import JobRow, gpus_from_json, job_rows_from_json, select_jobs


@dataclass(frozen=True)
class NodeRow:
    name: str
    gpus: tuple[Gpu, ...]
    state: NodeState
    version: str
    registered_at: float
    last_seen: float


_BIG = 256 * 1024  # bytes of JSON


class Reader:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def _jobs(self, where: str, params: Sequence[object]) -> list[JobRow]:
        async with self._conn.execute(select_jobs(where), tuple(params)) as cur:
            row = await cur.fetchone()
        text = row[0] if row else None
        if text is not None and len(text) > _BIG:
            # Thousands of rows: decode beside the loop, which keeps serving in the meantime.
            return await asyncio.to_thread(job_rows_from_json, text)
        return job_rows_from_json(text)

    async def job(self, job_id: str) -> JobRow | None:
        rows = await self._jobs("WHERE id = ?", (job_id,))
        return rows[0] if rows else None

    async def list_jobs(
        self, states: Sequence[JobState], owner: str | None, after_seq: int, limit: int
    ) -> list[JobRow]:
        clauses = ["seq > ?"]
        params: list[object] = [after_seq]
        if states:
            clauses.append(f"state IN ({','.join('?' * len(states))})")
            params.extend(s.value for s in states)
        if owner is not None:
            clauses.append("owner = ?")
            params.append(owner)
        params.append(limit)
        return await self._jobs(f"WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?", params)

    async def live_jobs(self) -> list[JobRow]:
        """Pending and active jobs, in submission order: what the master's live index
        (:mod:`master.store.live`) is built from at start."""
        return await self._jobs("WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING') ORDER BY seq", ())

    async def active_jobs(self, node: str | None = None) -> list[JobRow]:
        if node is None:
            return await self._jobs("WHERE state IN ('ASSIGNED', 'RUNNING') ORDER BY seq", ())
        # (the literal state list lets SQLite use the partial index jobs_by_node)
        return await self._jobs("WHERE node = ? AND state IN ('ASSIGNED', 'RUNNING') ORDER BY seq", (node,))

    async def count_jobs(self) -> int:
        async with self._conn.execute("SELECT COUNT(*) FROM jobs") as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def attempt_node(self, job_id: str, attempt: int) -> str | None:
        """The node an attempt was assigned to (from the job's history), None if never assigned."""
        async with self._conn.execute(
            "SELECT node FROM job_events WHERE job_id = ? AND attempt = ? AND to_state = 'ASSIGNED' LIMIT 1",
            (job_id, attempt),
        ) as cur:
            row = await cur.fetchone()
        return str(row[0]) if row else None

    async def nodes(self) -> list[NodeRow]:
        async with self._conn.execute(
            "SELECT name, gpus, state, version, registered_at, last_seen FROM nodes ORDER BY name"
        ) as cur:
            rows = await cur.fetchall()
        return [
            NodeRow(
                r["name"],
                gpus_from_json(r["gpus"], r["name"]),
                NodeState(r["state"]),
                r["version"],
                r["registered_at"],
                r["last_seen"],
            )
            for r in rows
        ]

    async def profiles(self, job_type: str | None = None, limit: int = -1) -> list[ProfileRow]:
        where, params = ("WHERE job_type = ?", (job_type,)) if job_type is not None else ("", ())
        async with self._conn.execute(
            "SELECT job_type, util_avg, util_peak, mem_mib, samples, co_speed, updated_at FROM profiles"
            f" {where} ORDER BY job_type LIMIT ?",
            (*params, limit),
        ) as cur:
            rows = await cur.fetchall()
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
        async with self._conn.execute(
            "SELECT job_type, gpu_type, gpus, samples_per_s, samples, updated_at FROM solo_throughputs"
            " ORDER BY job_type, gpu_type, gpus LIMIT ?",
            (limit,),
        ) as cur:
            rows = await cur.fetchall()
        return [
            SoloRow(
                r["job_type"], r["gpu_type"], r["gpus"], r["samples_per_s"], r["samples"], r["updated_at"]
            )
            for r in rows
        ]

    async def pair_speeds(self, limit: int = -1) -> list[PairRow]:
        """Measured pair speeds, one row per direction (``limit`` -1: all)."""
        async with self._conn.execute(
            "SELECT job_type, co_runner, gpu_type, speed, samples, updated_at FROM pair_speeds"
            " ORDER BY job_type, co_runner, gpu_type LIMIT ?",
            (limit,),
        ) as cur:
            rows = await cur.fetchall()
        return [
            PairRow(r["job_type"], r["co_runner"], r["gpu_type"], r["speed"], r["samples"], r["updated_at"])
            for r in rows
        ]
