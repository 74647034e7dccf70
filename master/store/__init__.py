"""Persistence on SQLite or PostgreSQL: one writer task with group commit, reads on a pool of their
own connections (docs/ha.md for PostgreSQL and the leader's fence)."""

from __future__ import annotations

import asyncio
import logging
import pathlib
from typing import TypeVar

import aiosqlite

from master.store import pgstore
from master.store.db import Migration, connect_reader, connect_writer, migrate
from master.store.jobs import QuarantineOp
from master.store.lease import Fence
from master.store.pg import PgConn, run_sync
from master.store.reads import NodeRow, Pool, Reader, ReaderPool
from master.store.rows import JobRow
from master.store.target import DbTarget, parse_db
from master.store.writer import WriteOp, Writer

T = TypeVar("T")
log = logging.getLogger(__name__)
READERS = 4  # read connections: concurrent reads, each on a fresh snapshot


class Store:
    def __init__(self, pool: Pool, writer: Writer, target: DbTarget | None = None) -> None:
        self._pool = pool
        self.target = target
        self.writer = writer
        self.read = Reader(pool, on_bad=self._quarantine)
        self._tasks: set[asyncio.Task[None]] = set()

    def _quarantine(self, job_id: str, why: str) -> None:
        """Mark a job whose stored row cannot be decoded FAILED, in the background (once)."""
        task = asyncio.get_running_loop().create_task(self._mark_failed(job_id, why))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _mark_failed(self, job_id: str, why: str) -> None:
        try:
            await self.writer.submit(QuarantineOp(job_id, f"stored row unreadable: {why}"[:1000]))
        except Exception as exc:  # the store is closing; the next start reports it again
            log.warning("could not mark job %s FAILED: %s", job_id, exc)

    @classmethod
    async def open(
        cls,
        path: pathlib.Path | str | DbTarget,
        *,
        group_commit: bool = True,
        max_batch: int = 1024,
        commit_delay_s: float = 0.001,
        migrations: list[Migration] | None = None,
        fence: Fence | None = None,
    ) -> Store:
        """Open (and migrate) the database ``path`` names: a SQLite file, or a PostgreSQL URL
        (:func:`master.store.target.parse_db`). ``fence``: on PostgreSQL, the leader's lease every
        write transaction checks first (None: a lone master, no lease)."""
        target = path if isinstance(path, DbTarget) else parse_db(path)
        if target.path is None:
            return await cls._open_pg(target, group_commit, max_batch, commit_delay_s, migrations, fence)
        path = target.path
        path.parent.mkdir(parents=True, exist_ok=True)
        writer: Writer | None = None
        conns: list[aiosqlite.Connection] = []
        try:
            conn = await asyncio.to_thread(connect_writer, path)
            writer = Writer(
                conn, group_commit=group_commit, max_batch=max_batch, commit_delay_s=commit_delay_s
            )
            await writer.call(migrate, conn, migrations)
            for _ in range(READERS):
                conns.append(await connect_reader(path))
        except BaseException:
            for c in conns:
                await c.close()
            if writer is not None:
                await writer.close()
            raise
        writer.start()
        return cls(ReaderPool(conns), writer, target)

    @classmethod
    async def _open_pg(
        cls,
        target: DbTarget,
        group_commit: bool,
        max_batch: int,
        commit_delay_s: float,
        migrations: list[Migration] | None,
        fence: Fence | None,
    ) -> Store:
        raw = await pgstore.connect(target.url)
        pool: pgstore.PgPool | None = None
        try:
            await pgstore.migrate(raw, migrations)
            pool = await pgstore.PgPool.open(target.url, READERS)
        except BaseException:
            await raw.close()
            raise
        writer = Writer(
            PgConn(raw),
            group_commit=group_commit,
            max_batch=max_batch,
            commit_delay_s=commit_delay_s,
            runner=run_sync,
            session=pgstore.PgSession(target.url, fence),
        )
        writer.start()
        return cls(pool, writer, target)

    async def write(self, op: WriteOp[T]) -> T:
        return await self.writer.submit(op)

    async def close(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.writer.close()
        await self._pool.close()


__all__ = ["DbTarget", "JobRow", "NodeRow", "Store", "parse_db"]
