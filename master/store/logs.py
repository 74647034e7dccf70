"""Attempt logs as rows (migration 0016), for masters on PostgreSQL: one row per chunk, appended
only at the log's end inside the writer's transaction (a duplicate, a retry after a lost COMMIT or
a chunk after a gap changes nothing), read by every master (issue 39)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from master.store.reads import Reader
from master.store.writer import Conn, WriteOp

_END = (
    "SELECT pos + length(data) FROM attempt_logs WHERE job_id = ? AND attempt = ? AND node = ?"
    " ORDER BY pos DESC LIMIT 1"
)


def _end(row: Any) -> int:
    return int(row[0]) if row is not None else 0


@dataclass(frozen=True)
class AppendLogOp(WriteOp[bool]):
    """Append ``data`` at ``offset`` if that is the part's end and the log stays within
    ``max_bytes``; False (nothing written) otherwise."""

    job_id: str
    attempt: int
    node: str
    offset: int
    data: bytes
    max_bytes: int

    def apply(self, conn: Conn) -> bool:
        end = _end(conn.execute(_END, (self.job_id, self.attempt, self.node)).fetchone())
        if self.offset != end or not self.data or end + len(self.data) > self.max_bytes:
            return False
        conn.execute(
            "INSERT INTO attempt_logs (job_id, attempt, node, pos, data) VALUES (?, ?, ?, ?, ?)",
            (self.job_id, self.attempt, self.node, self.offset, self.data),
        )
        return True


async def log_size(read: Reader, job_id: str, attempt: int, node: str) -> int:
    rows = await read.rows(_END, (job_id, attempt, node))
    return _end(rows[0] if rows else None)


async def log_read(read: Reader, job_id: str, attempt: int, offset: int, limit: int, node: str) -> bytes:
    """Up to ``limit`` bytes from ``offset`` (the chunks that hold them, cut to size)."""
    key = "job_id = ? AND attempt = ? AND node = ?"
    rows = await read.rows(  # (from the chunk that holds ``offset``: chunks are contiguous)
        f"SELECT pos, data FROM attempt_logs WHERE {key} AND pos >= COALESCE("
        f"(SELECT max(pos) FROM attempt_logs WHERE {key} AND pos <= ?), 0) ORDER BY pos LIMIT 64",
        (job_id, attempt, node, job_id, attempt, node, offset),
    )
    out = bytearray()
    for pos, data in rows:
        out += bytes(data)[max(0, offset + len(out) - int(pos)) :]
        if len(out) >= limit:
            break
    return bytes(out[:limit])


async def log_parts(read: Reader, job_id: str, attempt: int) -> list[str]:
    """The nodes of a gang attempt's parts other than rank 0 that have a log."""
    rows = await read.rows(
        "SELECT DISTINCT node FROM attempt_logs WHERE job_id = ? AND attempt = ? AND node <> ''",
        (job_id, attempt),
    )
    return sorted(str(r[0]) for r in rows)
