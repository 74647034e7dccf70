"""The leader's lease row (migration 0014) in SQL: taking it, renewing it, reading who holds it,
and the fence every write transaction of a leader starts with.

The row's ``expires_at`` is in seconds on the database's clock (``clock_timestamp()``), so the
masters' own clocks never decide who leads. The fence locks the row ``FOR SHARE`` for the rest of
the transaction: a takeover (an UPDATE of the row) waits until that write commits, and a write
that starts after a takeover finds another epoch and fails, so a deposed leader's transaction
never lands (docs/ha.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from horus_core.errors import Unavailable
from master.store.writer import Conn

NOW = "extract(epoch from clock_timestamp())::float8"


class Fenced(Unavailable):
    """This master no longer holds the lease: its write did not land."""


@dataclass(frozen=True)
class Term:
    """A leader's term: who, where its clients reach it, and the epoch it leads under."""

    holder: str
    address: str
    epoch: int


@dataclass(frozen=True)
class LeaseRow:
    holder: str
    address: str
    epoch: int
    remaining_s: float  # until it expires, on the database's clock (<= 0: expired)


class Fence:
    """The check a leader's write transactions start with; ``term`` None: not leading."""

    def __init__(self, on_fenced: Callable[[], None] | None = None) -> None:
        self.term: Term | None = None
        self._on_fenced = on_fenced

    def check(self, conn: Conn) -> None:
        term = self.term
        if term is None:
            raise Fenced("this master is not the leader; it writes nothing")
        # (and names the epoch for the transaction: job_events.epoch takes it, migration 0015)
        row = conn.execute(
            "SELECT set_config('horus.epoch', epoch::text, true) FROM leader_lease"
            f" WHERE id = 1 AND holder = ? AND epoch = ? AND expires_at > {NOW} FOR SHARE",
            (term.holder, term.epoch),
        ).fetchone()
        if row is None:
            self.term = None
            if self._on_fenced is not None:
                self._on_fenced()
            raise Fenced(f"this master's lease (epoch {term.epoch}) is gone; the write did not land")


async def read_lease(conn: asyncpg.Connection) -> LeaseRow:
    row = await conn.fetchrow(
        f"SELECT holder, address, epoch, expires_at - {NOW} AS left_s FROM leader_lease WHERE id = 1"
    )
    if row is None:
        return LeaseRow("", "", 0, 0.0)
    return LeaseRow(str(row["holder"]), str(row["address"]), int(row["epoch"]), float(row["left_s"]))


async def try_acquire(conn: asyncpg.Connection, holder: str, address: str, lease_s: float) -> Term | None:
    """Take the lease if it has expired (or was given up): the epoch goes up by one and the term
    is recorded. None: another master holds it."""
    async with conn.transaction():
        # (a leader's write holds the row while it commits; one cut off mid-write holds it until
        # the server ends its session: wait a moment, then poll again)
        await conn.execute("SET LOCAL lock_timeout = '2s'")
        epoch = await conn.fetchval(
            f"UPDATE leader_lease SET holder = $1, address = $2, epoch = epoch + 1, expires_at = {NOW} + $3"
            f" WHERE id = 1 AND (expires_at <= {NOW} OR holder = '') RETURNING epoch",
            holder,
            address,
            lease_s,
        )
        if epoch is None:
            return None
        await conn.execute(
            "INSERT INTO leader_terms (epoch, holder, address, started_at, renewed_at)"
            f" VALUES ($1, $2, $3, {NOW}, {NOW})",
            epoch,
            holder,
            address,
        )
    return Term(holder, address, int(epoch))


async def renew(conn: asyncpg.Connection, term: Term, lease_s: float) -> bool:
    """Extend the lease by ``lease_s`` from now; False: it had expired or another master took it."""
    async with conn.transaction():
        ok = await conn.fetchval(
            f"UPDATE leader_lease SET expires_at = {NOW} + $3 WHERE id = 1 AND holder = $1 AND epoch = $2"
            f" AND expires_at > {NOW} RETURNING epoch",
            term.holder,
            term.epoch,
            lease_s,
        )
        if ok is None:
            return False
        await conn.execute(f"UPDATE leader_terms SET renewed_at = {NOW} WHERE epoch = $1", term.epoch)
    return True


async def release(conn: asyncpg.Connection, term: Term) -> None:
    """Give the lease up (a clean stop): a standby may take it at once."""
    await conn.execute(
        "UPDATE leader_lease SET holder = '', expires_at = 0 WHERE id = 1 AND holder = $1 AND epoch = $2",
        term.holder,
        term.epoch,
    )
