"""The ``job_progress`` table (migration 0006): each job's kept progress reports, and the attempt
spans (from ``job_events`` and ``attempt_gpus``) that rebuild the attained service at start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from horus_core.policies.optimus.journal import ProgressPoint
from master.store.dialect import json_field, upsert
from master.store.reads import Reader
from master.store.writer import Conn, WriteOp

_COLUMNS = "attempt, step, loss, samples_per_s, at"
_UPSERT = upsert("job_progress", ("job_id", "seq", *_COLUMNS.split(", ")), ("job_id", "seq"))


@dataclass(frozen=True)
class JournalRows:
    """The rows of one job to write: ``points`` at positions ``start``, ``start + 1``, ...;
    ``rewrite`` first removes every stored row of the job (after the journal thinned itself)."""

    job_id: str
    rewrite: bool
    start: int
    points: tuple[ProgressPoint, ...]


@dataclass(frozen=True)
class SaveProgressOp(WriteOp[int]):
    """Write what changed in each job's kept reports (appends, or a rewrite after thinning)."""

    jobs: tuple[JournalRows, ...]

    def apply(self, conn: Conn) -> int:
        rows = 0
        for job in self.jobs:
            if job.rewrite:
                conn.execute("DELETE FROM job_progress WHERE job_id = ?", (job.job_id,))
            conn.executemany(
                _UPSERT,
                [
                    (job.job_id, job.start + i, p.attempt, p.step, p.loss, p.samples_per_s, p.at)
                    for i, p in enumerate(job.points)
                ],
            )
            rows += len(job.points)
        return rows


def _point(row: Sequence[Any]) -> ProgressPoint:
    attempt, step, loss, rate, at = row
    return ProgressPoint(
        int(attempt), int(step), None if loss is None else float(loss), float(rate), float(at)
    )


async def load_progress(read: Reader, job_id: str) -> list[ProgressPoint]:
    rows = await read.rows(f"SELECT {_COLUMNS} FROM job_progress WHERE job_id = ? ORDER BY seq", (job_id,))
    return [_point(tuple(r)) for r in rows]


async def load_live_progress(read: Reader) -> dict[str, list[ProgressPoint]]:
    """The stored reports of every job not yet finished, by job id."""
    rows = await read.rows(
        f"SELECT p.job_id, {', '.join('p.' + c for c in _COLUMNS.split(', '))} FROM job_progress p"
        " JOIN jobs j ON j.id = p.job_id WHERE j.state IN ('PENDING', 'ASSIGNED', 'RUNNING')"
        " ORDER BY p.job_id, p.seq"
    )
    out: dict[str, list[ProgressPoint]] = {}
    for r in rows:
        out.setdefault(str(r[0]), []).append(_point(tuple(r)[1:]))
    return out


async def attained_service(read: Reader, now: float) -> tuple[dict[str, float], dict[str, tuple[int, float]]]:
    """Each live job's GPU-seconds run so far (every RUNNING span of its attempts x the attempt's
    GPU count; a span still open ends at ``now``), and the running attempts' (attempt, start)."""
    rows = await read.rows(
        "SELECT e.job_id, e.attempt, e.at, e.from_state, e.to_state,"
        f" COALESCE(g.gpus, {json_field('j.spec', 'gpus', pg=read.pg, as_int=True)}, 1)"
        " FROM job_events e JOIN jobs j ON j.id = e.job_id"
        " LEFT JOIN attempt_gpus g ON g.job_id = e.job_id AND g.attempt = e.attempt"
        " WHERE j.state IN ('PENDING', 'ASSIGNED', 'RUNNING')"
        " AND (e.to_state = 'RUNNING' OR e.from_state = 'RUNNING') ORDER BY e.id"
    )
    service: dict[str, float] = {}
    open_: dict[str, tuple[int, float, int]] = {}
    for job_id, attempt, at, from_state, to_state, gpus in rows:
        start = open_.pop(job_id, None)
        if from_state == "RUNNING" and start is not None and start[0] == attempt:
            service[job_id] = service.get(job_id, 0.0) + max(float(at) - start[1], 0.0) * start[2]
        if to_state == "RUNNING":
            open_[job_id] = (int(attempt), float(at), int(gpus))
    for job_id, (_, begun, gpus) in open_.items():
        service[job_id] = service.get(job_id, 0.0) + max(now - begun, 0.0) * gpus
    return service, {job_id: (a, begun) for job_id, (a, begun, _) in open_.items()}
