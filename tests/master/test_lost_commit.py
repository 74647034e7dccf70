"""A batch whose COMMIT landed on PostgreSQL but whose answer was lost (the connection dropped
right after it) is not applied a second time by the writer's retry (issue 39 defect 6): the
transaction carries a commit mark, and the writer asks the server whether it landed before it
retries anything. Real PostgreSQL; the fault is a real COMMIT, then the connection cut."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from horus_core.errors import Unavailable
from master.store import Store
from master.store.pg import PgConn
from master.store.pgstore import PgSession
from master.store.writer import Conn, WriteOp
from tests.pgtest import fresh_database

applied: list[int] = []


@dataclass(frozen=True)
class Bump(WriteOp[int]):
    """Not idempotent on purpose: applied twice, its counter shows 2."""

    row: int

    def apply(self, conn: Conn) -> int:
        conn.execute("UPDATE bumps SET n = n + 1 WHERE id = ?", (self.row,))
        applied.append(self.row)
        return self.row


@dataclass(frozen=True)
class Slow(WriteOp[None]):
    """Keeps the writer busy while the bumps queue up behind it (they then commit as one batch)."""

    def apply(self, conn: Conn) -> None:
        conn.execute("SELECT pg_sleep(0.3)")


def lose_the_answer_of_the_first_commit_after_a_bump(conn: PgConn) -> None:
    real = conn.execute
    fired = False

    def execute(sql: str, params: Any = (), /) -> Any:
        nonlocal fired
        if sql == "COMMIT" and applied and not fired:
            fired = True
            real(sql, params)  # it lands ...
            conn.raw.terminate()  # ... and the answer never comes back
            raise ConnectionResetError("connection lost after COMMIT")
        return real(sql, params)

    conn.execute = execute  # type: ignore[method-assign]


async def test_a_batch_whose_commit_answer_is_lost_applies_once() -> None:
    async with fresh_database() as url:
        store = await Store.open(url)
        raw = await asyncpg.connect(url)
        try:
            await raw.execute("CREATE TABLE bumps (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
            await raw.execute("INSERT INTO bumps SELECT g, 0 FROM generate_series(1, 3) g")
            conn = store.writer._conn
            assert isinstance(conn, PgConn)
            applied.clear()
            lose_the_answer_of_the_first_commit_after_a_bump(conn)
            slow = asyncio.ensure_future(store.write(Slow()))
            await asyncio.sleep(0.1)
            results = await asyncio.gather(*(store.write(Bump(i)) for i in (1, 2, 3)), return_exceptions=True)
            await slow
            assert applied[:3] == [1, 2, 3]  # (one transaction: the lost COMMIT was theirs)
            counts = [r["n"] for r in await raw.fetch("SELECT n FROM bumps ORDER BY id")]
            assert counts == [1, 1, 1], f"applied twice: {counts}"
            assert results == [1, 2, 3]  # acknowledged: it did land
        finally:
            await raw.close()
            await store.close()


async def test_a_commit_whose_outcome_cannot_be_told_is_not_retried() -> None:
    """The server unreachable when the writer asks: the writes fail UNAVAILABLE, none is retried
    (a retry could apply them twice); they did land once."""
    async with fresh_database() as url:
        store = await Store.open(url)
        raw = await asyncpg.connect(url)
        try:
            await raw.execute("CREATE TABLE bumps (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
            await raw.execute("INSERT INTO bumps VALUES (1, 0)")
            conn, session = store.writer._conn, store.writer._session
            assert isinstance(conn, PgConn) and isinstance(session, PgSession)
            applied.clear()
            lose_the_answer_of_the_first_commit_after_a_bump(conn)
            session._url = "postgresql://postgres@127.0.0.1:1/none"  # (nowhere to ask)
            with pytest.raises(Unavailable, match="may have landed"):
                await store.write(Bump(1))
            assert await raw.fetchval("SELECT n FROM bumps WHERE id = 1") == 1
        finally:
            await raw.close()
            await store.close()
