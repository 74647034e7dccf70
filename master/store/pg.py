"""PostgreSQL under the store's synchronous ops: asyncpg connections seen through the small part of
the sqlite3 API the ops use, run on the event loop by switching greenlets.

The store's write ops are plain functions of a connection (``conn.execute(sql, params)``), so no
``await`` can sit inside a transaction. On SQLite they run on the writer's thread; on PostgreSQL
:func:`run_sync` runs them in a greenlet on the loop, and each statement hands its asyncpg call to
the loop (:func:`await_`), which serves other work until the answer comes back. Only the
statements of the op wait; the op's own code still cannot await anything else.

SQL is written once with ``?`` placeholders; :func:`to_pg` numbers them (``$1``, ``$2``, ...).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

import asyncpg
import greenlet

T = TypeVar("T")
UNIQUE_VIOLATION: tuple[type[Exception], ...] = (asyncpg.UniqueViolationError,)
_STATUS_COUNT = re.compile(r"(\d+)\s*$")
_ROWS = re.compile(r"^\s*(SELECT|WITH|VALUES)\b|\bRETURNING\b", re.IGNORECASE)


class _OpGreenlet(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet running a store op: the only place :func:`await_` may be called."""


def await_(awaitable: Awaitable[T]) -> T:
    """From inside :func:`run_sync`: wait for ``awaitable`` on the loop and return its result."""
    current = greenlet.getcurrent()
    if not isinstance(current, _OpGreenlet):
        raise RuntimeError("a PostgreSQL statement ran outside the store's writer (run_sync)")
    return cast(T, current.parent.switch(awaitable))


async def run_sync(fn: Callable[..., T], *args: Any) -> T:
    """Run the synchronous ``fn(*args)``, awaiting on the loop each statement it hands over."""
    g = _OpGreenlet(fn)
    step = g.switch(*args)
    while not g.dead:
        try:
            value = await step
        except BaseException as exc:  # (cancellation included: the op rolls back and re-raises)
            step = g.throw(exc)
        else:
            step = g.switch(value)
    return cast(T, step)


@functools.lru_cache(maxsize=4096)
def to_pg(sql: str) -> str:
    """``?`` placeholders as ``$1``, ``$2``, ... (none sits inside a quoted literal in our SQL)."""
    out: list[str] = []
    n = 0
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
        if ch == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


class PgCursor:
    """What a statement returned: its rows (``fetchone``, ``fetchall``, iteration) and
    ``rowcount`` (rows changed, from the command's status)."""

    def __init__(self, rows: list[asyncpg.Record], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> asyncpg.Record | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[asyncpg.Record]:
        return list(self._rows)

    def __iter__(self) -> Iterator[asyncpg.Record]:
        return iter(self._rows)


class PgConn:
    """An asyncpg connection with the sqlite3 surface the store's ops use, inside :func:`run_sync`."""

    dialect = "postgresql"

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.raw = conn

    @property
    def in_transaction(self) -> bool:
        return bool(self.raw.is_in_transaction())

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> PgCursor:
        q = to_pg(sql)
        if _ROWS.search(q):
            rows = await_(self.raw.fetch(q, *params))
            return PgCursor(rows, len(rows))
        status = await_(self.raw.execute(q, *params))
        m = _STATUS_COUNT.search(status or "")
        return PgCursor([], int(m.group(1)) if m else -1)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]], /) -> None:
        rows = [tuple(r) for r in seq]
        if rows:
            await_(self.raw.executemany(to_pg(sql), rows))

    def close(self) -> None:
        await_(self.raw.close())


def is_pg(conn: object) -> bool:
    """Whether a store op runs on PostgreSQL (else on SQLite)."""
    return isinstance(conn, PgConn)
