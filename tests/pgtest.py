"""PostgreSQL for tests: a fresh database per test on the server $HORUS_TEST_PG names
(``bash scripts/pg-dev.sh`` starts one). Without it the tests that need it skip with the reason,
unless $HORUS_REQUIRE_PG is set (CI), where its absence fails them."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ENV = "HORUS_TEST_PG"
REQUIRE_ENV = "HORUS_REQUIRE_PG"


def server_url() -> str:
    url = os.environ.get(ENV, "").strip()
    if not url:
        why = f"no PostgreSQL: set ${ENV} (bash scripts/pg-dev.sh starts one and prints its URL)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"${REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    return url


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new empty database (its URL), dropped afterwards."""
    url = server_url()
    try:
        admin = await asyncpg.connect(url, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"PostgreSQL at ${ENV} does not answer: {exc}")
        pytest.skip(f"PostgreSQL at ${ENV} does not answer: {exc}")
    name = f"horus_t_{secrets.token_hex(6)}"
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        yield with_database(url, name)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


class Db:
    """A database of either backend for a test: ``target`` is what ``Store.open`` and
    ``--db`` take; :meth:`rows` reads it directly (not through the store)."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind, self.target = kind, target

    @property
    def pg(self) -> bool:
        return self.kind == "postgresql"

    async def rows(self, sql: str) -> list[tuple[object, ...]]:
        if self.pg:
            conn = await asyncpg.connect(self.target, timeout=5)
            try:
                return [tuple(r) for r in await conn.fetch(sql)]
            finally:
                await conn.close()
        import sqlite3

        with sqlite3.connect(self.target) as c:
            return [tuple(r) for r in c.execute(sql)]
