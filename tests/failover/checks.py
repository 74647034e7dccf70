"""What the failover suite asserts after its faults: every acknowledged job SUCCEEDED, no job's
attempts overlapped or completed twice (from what really ran), leaders' terms never overlapped,
and how long each failover took (death to the first placement by the next leader)."""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections import defaultdict
from itertools import pairwise

import asyncpg

from horus_core.errors import HorusError
from horus_core.model import JobState
from tests.failover.harness import HaCluster


def wait_all_done(cluster: HaCluster, within_s: float = 180.0) -> dict[str, JobState]:
    ids = set(cluster.submitted.ids)
    deadline = time.monotonic() + within_s
    states: dict[str, JobState] = {}
    with cluster.client() as c:
        while time.monotonic() < deadline:
            try:
                states = {i: c.get(i).state for i in ids}
            except HorusError:
                time.sleep(0.5)
                continue
            if all(s.terminal for s in states.values()):
                return states
            time.sleep(1.0)
    open_ = {i: s for i, s in states.items() if not s.terminal}
    raise AssertionError(f"{len(open_)} acknowledged jobs not finished: {list(open_.items())[:5]}")


def runs(record: pathlib.Path) -> dict[str, dict[int, dict[str, float]]]:
    """job -> attempt -> {"start": t, "end": t}, from the jobs' own lines."""
    out: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for line in record.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:
            what, job, attempt, at = parts
            out[job].setdefault(int(attempt), {})[what] = float(at)
    return out


def check_runs(record: pathlib.Path, ids: set[str]) -> None:
    """Each job ran to its end exactly once, and no two of its attempts overlapped."""
    seen = runs(record)
    for job in ids:
        attempts = seen.get(job, {})
        complete = [a for a, r in attempts.items() if "end" in r and r["end"] - r["start"] >= 1.0]
        assert len(complete) >= 1, f"job {job} never ran to its end: {attempts}"
        spans = sorted(
            (r["start"], r.get("end", r.get("killed", float("inf"))), a) for a, r in attempts.items()
        )
        for (s1, e1, a1), (s2, _, a2) in pairwise(spans):
            assert s2 >= e1, f"job {job}: attempts {a1} and {a2} overlapped ({s1}-{e1}, from {s2})"
        assert len(complete) == 1, f"job {job} ran to its end {len(complete)} times: {attempts}"


async def _terms(url: str) -> list[tuple[int, str, float, float]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT epoch, holder, started_at, renewed_at FROM leader_terms ORDER BY epoch"
        )
        return [(int(r[0]), str(r[1]), float(r[2]), float(r[3])) for r in rows]
    finally:
        await conn.close()


def check_terms(cluster: HaCluster) -> list[tuple[int, str, float, float]]:
    """No term began before the one before it was last renewed (database clock)."""
    terms = asyncio.run(_terms(cluster.pg.url))
    for (e1, _, _, renewed), (e2, _, started, _) in pairwise(terms):
        assert e2 == e1 + 1 and started >= renewed, f"terms {e1} and {e2} overlap: {terms}"
    return terms


async def _epochs(url: str) -> list[tuple[int, int, int, int]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT epoch, min(id), max(id), count(*) FROM job_events GROUP BY epoch ORDER BY epoch"
        )
        return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]
    finally:
        await conn.close()


def check_write_epochs(cluster: HaCluster) -> int:
    """Every job event was written under a leader's fence (its epoch, never 0), and all of one
    term's events come before all of the next term's: no two leaders' writes interleave."""
    epochs = asyncio.run(_epochs(cluster.pg.url))
    assert epochs and epochs[0][0] > 0, f"events written outside a term: {epochs}"
    for (e1, _, last, _), (e2, first, _, _) in pairwise(epochs):
        assert last < first, f"the writes of terms {e1} and {e2} interleave: {epochs}"
    return len(epochs)


async def _first_placement(url: str, after: float) -> float | None:
    conn = await asyncpg.connect(url)
    try:
        at = await conn.fetchval(
            "SELECT min(at) FROM job_events WHERE to_state = 'ASSIGNED' AND at > $1", after
        )
        return None if at is None else float(at)
    finally:
        await conn.close()


def failover_s(cluster: HaCluster, death: float, within_s: float = 60.0) -> float:
    """Seconds from ``death`` (time.time()) to the first assignment any leader made after it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        at = asyncio.run(_first_placement(cluster.pg.url, death))
        if at is not None:
            return at - death
        time.sleep(0.25)
    raise AssertionError(f"no placement within {within_s} s of the leader's death\n" + cluster.logs())
