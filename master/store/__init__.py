"""SQLite persistence: one writer task with group commit, reads on a separate connection."""

from __future__ import annotations

import asyncio
import pathlib
from typing import TypeVar

import aiosqlite

from master.store.db import Migration, connect_reader, connect_writer, migrate
from master.store.reads import NodeRow, Reader
from master.store.rows import JobRow
from master.store.writer import WriteOp, Writer

T = TypeVar("T")


class Store:
    def __init__(self, rconn: aiosqlite.Connection, writer: Writer) -> None:
        self._rconn = rconn
        self.writer = writer
        self.read = Reader(rconn)

    @classmethod
    async def open(
        cls,
        path: pathlib.Path,
        *,
        group_commit: bool = True,
        max_batch: int = 1024,
        commit_delay_s: float = 0.001,
        migrations: list[Migration] | None = None,
    ) -> Store:
        path.parent.mkdir(parents=True, exist_ok=True)
        writer: Writer | None = None
        try:
            conn = await asyncio.to_thread(connect_writer, path)
            writer = Writer(
                conn, group_commit=group_commit, max_batch=max_batch, commit_delay_s=commit_delay_s
            )
            await writer.call(migrate, conn, migrations)
            rconn = await connect_reader(path)
        except BaseException:
            if writer is not None:
                await writer.close()
            raise
        writer.start()
        return cls(rconn, writer)

    async def write(self, op: WriteOp[T]) -> T:
        return await self.writer.submit(op)

    async def close(self) -> None:
        await self.writer.close()
        await self._rconn.close()


__all__ = ["JobRow", "NodeRow", "Store"]
