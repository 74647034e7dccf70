"""Write operations on jobs: submissions (batched) and state transitions.

Each op issues as few statements as it can (one multi-row INSERT, an UPDATE ... FROM VALUES per set
of changed columns): every statement the writer thread steps through costs a hand-over of the GIL
from the event loop. The ``job_events`` rows are written by triggers (see the migration).
"""

from __future__ import annotations

import dataclasses
import json
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from horus_core.evolve import evolve
from horus_core.model import Job, JobSpec
from master.store.dialect import select_jobs, update_from_values
from master.store.pg import UNIQUE_VIOLATION, is_pg
from master.store.rows import (
    JOB_INSERT_ARITY,
    JOB_INSERT_COLUMNS,
    JOB_UPDATE_COLUMNS,
    JobRow,
    as_stored,
    column_param,
    job_columns,
    job_insert_params,
    job_rows_from_json,
)
from master.store.writer import Conn, WriteOp

_CHUNK = 1000  # rows per statement: 15 variables each stays far below SQLite's 32766

# A transition looks at the stored row and returns the new row, or None for "no change".
Transition = Callable[[JobRow], JobRow | None]

_ID_TAKEN: tuple[type[Exception], ...] = (sqlite3.IntegrityError, *UNIQUE_VIOLATION)

_rng = random.Random(secrets.randbits(128))


def new_job_id() -> str:
    """12 hex digits; unique by chance (a collision fails its insert and is drawn again)."""
    return f"{_rng.getrandbits(48):012x}"


@dataclass(frozen=True)
class SubmitResult:
    row: JobRow
    created: bool


@dataclass(frozen=True)
class Change:
    before: JobRow
    after: JobRow

    @property
    def state_changed(self) -> bool:
        b, a = self.before.job, self.after.job
        return b.state is not a.state or b.attempt != a.attempt


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def fetch_rows(
    conn: Conn, column: str, keys: Sequence[str], specs: Mapping[str, JobSpec] | None = None
) -> dict[str, JobRow]:
    """Rows whose ``column`` (``id`` or ``request_id``) is one of ``keys``, keyed by that column.
    ``specs``: specs the caller knows, by job id (a spec never changes once stored): those rows
    are read without theirs."""
    known = specs if specs and column == "id" else {}
    out = _fetch(conn, column, [k for k in keys if k not in known], {})
    out.update(_fetch(conn, column, [k for k in keys if k in known], known))
    return out


def _fetch(conn: Conn, column: str, keys: Sequence[str], specs: Mapping[str, JobSpec]) -> dict[str, JobRow]:
    out: dict[str, JobRow] = {}
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        sql = select_jobs(f"WHERE {column} IN ({marks})", spec=not specs, pg=is_pg(conn))
        (text,) = conn.execute(sql, tuple(chunk)).fetchone()
        for jr in job_rows_from_json(text, specs):
            out[jr.job.id if column == "id" else str(jr.request_id)] = jr
    return out


@dataclass(frozen=True)
class SubmitOp(WriteOp[SubmitResult]):
    """Insert a new PENDING job unless its request_id was seen before (then return that job)."""

    batchable: ClassVar[bool] = True
    job: Job
    request_id: str | None

    def apply(self, conn: Conn) -> SubmitResult:
        op = self
        pg = is_pg(conn)  # (a failed statement there spoils the transaction: undo it alone)
        for _ in range(5):
            try:
                if pg:
                    conn.execute("SAVEPOINT submit")
                result: SubmitResult = SubmitOp.apply_many(conn, [op])[0]
                if pg:
                    conn.execute("RELEASE SAVEPOINT submit")
                return result
            except _ID_TAKEN:  # a job id collision: draw another
                if pg:
                    conn.execute("ROLLBACK TO SAVEPOINT submit")
                op = dataclasses.replace(op, job=dataclasses.replace(op.job, id=new_job_id()))
        raise RuntimeError("could not allocate a job id")

    @classmethod
    def apply_many(cls, conn: Conn, ops: Sequence[WriteOp[Any]]) -> list[Any]:
        subs = [dataclasses.replace(op, job=as_stored(op.job)) for op in ops if isinstance(op, SubmitOp)]
        first: dict[str, SubmitOp] = {}  # request_id -> the op of this batch that inserts it
        inserts: list[SubmitOp] = []
        for op in subs:
            if op.request_id is None or op.request_id not in first:
                inserts.append(op)
                if op.request_id is not None:
                    first[op.request_id] = op
        stored: dict[str, JobRow] = {}  # request_id -> the row that was already there
        for chunk in _chunks(inserts):
            values = ",".join(["(" + ",".join("?" * JOB_INSERT_ARITY) + ")"] * len(chunk))
            params = [p for op in chunk for p in job_insert_params(op.job, op.request_id)]
            cur = conn.execute(
                f"INSERT INTO jobs {JOB_INSERT_COLUMNS} VALUES {values} ON CONFLICT(request_id) DO NOTHING",
                params,
            )
            if cur.rowcount != len(chunk):  # some request ids were known: find which
                keys = [op.request_id for op in chunk if op.request_id is not None]
                found = fetch_rows(conn, "request_id", keys)
                stored.update({k: r for k, r in found.items() if r.job.id != first[k].job.id})
        results: list[Any] = []
        for op in subs:
            rid = op.request_id
            if rid is not None and rid in stored:
                results.append(SubmitResult(stored[rid], created=False))
            elif rid is not None and first[rid] is not op:
                results.append(SubmitResult(JobRow(first[rid].job, request_id=rid), created=False))
            else:
                results.append(SubmitResult(JobRow(op.job, request_id=rid), created=True))
        return results


def _update_sql(columns: tuple[int, ...], rows: int, pg: bool) -> str:
    """One UPDATE of ``rows`` jobs setting the columns at ``columns`` of :func:`job_columns`
    (1 = the first of :data:`JOB_UPDATE_COLUMNS`), from VALUES rows (id, those columns)."""
    names = [JOB_UPDATE_COLUMNS[i - 1] for i in columns]
    return update_from_values("jobs", "id", names, rows, pg=pg)


def write_changes(conn: Conn, changes: Sequence[Change]) -> None:
    """Store each change's new row (distinct jobs, each ``before`` as stored), writing only the
    columns that changed; rows that change the same columns share a statement per chunk. (A
    pass's new pending reasons then touch no index and fire no trigger: half the commit.)"""
    groups: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}
    pg = is_pg(conn)
    for c in changes:
        new, old = job_columns(c.after), job_columns(c.before)
        columns = tuple(i for i in range(1, len(new)) if new[i] != old[i])
        groups.setdefault(columns, []).append((new[0], *(column_param(i, new[i]) for i in columns)))
    for columns, rows in groups.items():
        for chunk in _chunks(rows):
            conn.execute(_update_sql(columns, len(chunk), pg), [p for row in chunk for p in row])


def held_rows(conn: Conn, ids: Sequence[str], held: Mapping[str, JobRow]) -> dict[str, JobRow]:
    """The stored rows of ``ids``, by id: the ``held`` row of a job where the stored version is
    the held one's (every write of a job gives it a new version, so the row is the same: decoding
    it again was most of what reading it cost); the others read (without the held jobs' specs:
    a spec never changes once stored)."""
    out: dict[str, JobRow] = {}
    for job_id, version, seq in stored_versions(conn, [i for i in ids if i in held]):
        row = held[job_id]
        if row.job.version == version:  # (a row indexed from its submission does not know its seq)
            out[job_id] = row if row.seq == seq else dataclasses.replace(row, seq=seq)
    rest = [i for i in ids if i not in out]
    out.update(fetch_rows(conn, "id", rest, {i: held[i].job.spec for i in rest if i in held}))
    return out


def stored_versions(conn: Conn, ids: Sequence[str]) -> list[tuple[str, int, int]]:
    """(id, version, seq) of each stored job among ``ids``."""
    out: list[tuple[str, int, int]] = []
    pg = is_pg(conn)  # (asyncpg hands rows over without the GIL hand-offs sqlite3 makes per row)
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        if pg:
            rows = conn.execute(f"SELECT id, version, seq FROM jobs WHERE id IN ({marks})", tuple(chunk))
        else:
            sql = f"SELECT json_group_array(json_array(id, version, seq)) FROM jobs WHERE id IN ({marks})"
            (text,) = conn.execute(sql, tuple(chunk)).fetchone()
            rows = json.loads(text)
        out += [(str(i), int(v), int(q)) for i, v, q in rows]
    return out


@dataclass(frozen=True)
class TransitionOp(WriteOp[list[Change]]):
    """Apply ``transitions`` to the current rows of their jobs, in one transaction.

    Each transition sees the row as committed by every earlier write (the writer is serial), so
    a decision made on a stale snapshot is re-checked here. Missing jobs are skipped.
    """

    transitions: tuple[tuple[str, Transition], ...]
    # Rows of (some of) the jobs the caller holds, by id (the master's live index): see held_rows.
    held: Mapping[str, JobRow] = dataclasses.field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return len(self.transitions)

    def apply(self, conn: Conn) -> list[Change]:
        ids = list(dict.fromkeys(job_id for job_id, _ in self.transitions))
        current = held_rows(conn, ids, self.held)
        changes: list[Change] = []
        rounds: list[dict[str, Change]] = []  # a job changed twice goes into a second statement
        for job_id, fn in self.transitions:
            before = current.get(job_id)
            if before is None:
                continue
            after = fn(before)
            if after is None or after == before:
                continue
            bumped = as_stored(after.job, before.job.version + 1)
            after = evolve(after, job=bumped)
            current[job_id] = after
            changes.append(Change(before, after))
            slot = next((r for r in rounds if job_id not in r), None)
            if slot is None:
                slot = {}
                rounds.append(slot)
            slot[job_id] = changes[-1]
        for r in rounds:
            write_changes(conn, list(r.values()))
        return changes


@dataclass(frozen=True)
class SetPendingReasonOp(WriteOp[int]):
    """Set the reason of every pending job at once (e.g. "no ready nodes"); each row changed
    counts one change (``version``)."""

    reason: str
    code: str = ""

    def apply(self, conn: Conn) -> int:
        cur = conn.execute(
            "UPDATE jobs SET reason = ?, reason_code = ?, version = version + 1"
            " WHERE state = 'PENDING' AND (reason != ? OR reason_code != ?)",
            (self.reason, self.code, self.reason, self.code),
        )
        return int(cur.rowcount)


def request_key(owner: str, request_id: str) -> str:
    """The stored idempotency key: request ids are per user (the owner has no control characters,
    so the separator keeps two users' keys apart; migration 0003 rewrote the older rows)."""
    return f"{owner}\x1f{request_id}"


@dataclass(frozen=True)
class QuarantineOp(WriteOp[int]):
    """Mark a job whose stored row cannot be decoded FAILED (its stored spec is kept as evidence),
    with a new version, as every write of a job (:func:`held_rows` relies on it)."""

    job_id: str
    reason: str
    at: float = dataclasses.field(default_factory=time.time)

    def apply(self, conn: Conn) -> int:
        cur = conn.execute(
            "UPDATE jobs SET state = 'FAILED', reason = ?, updated_at = ?, finished_at = ?,"
            " version = version + 1 WHERE id = ? AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')",
            (self.reason, self.at, self.at, self.job_id),
        )
        return int(cur.rowcount)
