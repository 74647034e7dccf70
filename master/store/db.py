"""Opening the database: pragmas and numbered, append-only migrations."""

from __future__ import annotations

import logging
import pathlib
import re
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import aiosqlite

log = logging.getLogger(__name__)

MIN_SQLITE = (3, 35, 0)  # UPDATE ... FROM, the JSON functions
_MIGRATION_NAME = re.compile(r"^(\d{4})_[A-Za-z0-9_]+\.sql$")


PG_FOLDER = "postgresql"  # per-dialect overrides: <migrations>/postgresql/NNNN_*.sql
_PG_REAL = re.compile(r"\bREAL\b")


@dataclass(frozen=True)
class Migration:
    """One numbered migration: ``sql`` for SQLite, and for PostgreSQL the override file of the same
    number when there is one, else the same text with ``REAL`` read as ``DOUBLE PRECISION``
    (:attr:`postgres`; docs/ha.md, "Adding a migration")."""

    version: int
    name: str
    sql: str
    pg_sql: str | None = None

    @property
    def postgres(self) -> str:
        return self.pg_sql if self.pg_sql is not None else _PG_REAL.sub("DOUBLE PRECISION", self.sql)


def packaged_migrations() -> list[Migration]:
    folder = resources.files("master") / "migrations"
    pg = folder / PG_FOLDER
    return _parse(
        ((e.name, e.read_text(encoding="utf-8")) for e in folder.iterdir() if e.is_file()),
        ((e.name, e.read_text(encoding="utf-8")) for e in pg.iterdir() if e.is_file()) if pg.is_dir() else (),
    )


def migrations_from(folder: pathlib.Path) -> list[Migration]:
    pg = folder / PG_FOLDER
    return _parse(
        ((p.name, p.read_text(encoding="utf-8")) for p in folder.iterdir() if p.is_file()),
        ((p.name, p.read_text(encoding="utf-8")) for p in pg.iterdir() if p.is_file()) if pg.is_dir() else (),
    )


def _parse(files: Iterable[tuple[str, str]], pg_files: Iterable[tuple[str, str]] = ()) -> list[Migration]:
    out: list[Migration] = []
    for name, text in files:
        m = _MIGRATION_NAME.match(name)
        if m:
            out.append(Migration(int(m.group(1)), name, text))
    out.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in out]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration numbers: {versions}")
    by_version = {mig.version: i for i, mig in enumerate(out)}
    for name, text in pg_files:
        m = _MIGRATION_NAME.match(name)
        if not m:
            continue
        i = by_version.get(int(m.group(1)))
        if i is None:
            raise RuntimeError(f"{PG_FOLDER}/{name} overrides no migration of its number")
        out[i] = Migration(out[i].version, out[i].name, out[i].sql, text)
    return out


def lenient_text(raw: bytes) -> str:
    """TEXT as str; invalid UTF-8 (only a damaged row can hold it) is replaced, not an error that
    would fail the whole query."""
    return raw.decode("utf-8", "replace")


def connect_writer(path: pathlib.Path) -> sqlite3.Connection:
    """The write connection: autocommit mode (transactions are explicit), WAL, synchronous=FULL.

    Used only from the writer's own thread (see :class:`master.store.writer.Writer`).
    """
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise RuntimeError(f"SQLite {sqlite3.sqlite_version} is too old: the store needs 3.35 or newer")
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.text_factory = lenient_text
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


async def connect_reader(path: pathlib.Path) -> aiosqlite.Connection:
    """A read-only connection; WAL lets it read while the writer writes."""
    conn = await aiosqlite.connect(str(path), isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.text_factory = lenient_text
    await conn.execute("PRAGMA busy_timeout = 10000")
    await conn.execute("PRAGMA query_only = ON")
    return conn


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply the migrations not yet recorded in ``schema_version``; return the versions applied."""
    todo = packaged_migrations() if migrations is None else migrations
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    done = {int(row[0]) for row in conn.execute("SELECT version FROM schema_version")}
    applied: list[int] = []
    for mig in todo:
        if mig.version in done:
            continue
        log.info("applying migration %s", mig.name)
        # executescript commits anything pending first, then runs the script as written: the
        # migration and its schema_version row commit together or not at all.
        script = (
            "BEGIN IMMEDIATE;\n"
            f"{mig.sql}\n;\n"
            f"INSERT INTO schema_version (version, name, applied_at) "
            f"VALUES ({mig.version}, '{mig.name}', {time.time()!r});\n"
            "COMMIT;"
        )
        try:
            conn.executescript(script)
        except Exception:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(mig.version)
    return applied
