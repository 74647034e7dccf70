"""A fresh PostgreSQL database for a benchmark run (bench/master_pass.py, bench/submit.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg


@asynccontextmanager
async def fresh_database(server: str) -> AsyncIterator[str]:
    """A new empty database on the server ``server`` names (its URL), dropped afterwards."""
    admin = await asyncpg.connect(server)
    name = f"horus_bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(server)._replace(path="/" + name))
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
