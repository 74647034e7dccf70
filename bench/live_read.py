"""The master's per-pass read of the live jobs, against decoding them all from JSON.

    .venv/bin/python bench/live_read.py [--jobs 12500] [--running 2500] [--repeat 5]

A real SQLite store with ``--jobs`` live jobs (``--running`` of them RUNNING on 8-GPU nodes, the
rest PENDING). ``live`` is ``Reader.live_jobs()`` as a scheduling pass calls it, steady (nothing
changed since the last pass) and after a quarter of the rows changed; ``json`` is the same rows
through the general JSON read (``json_group_array`` + decoding every row) measured in the same
run. One JSON line per measurement (median ms), then the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

from horus_core.model import Job, JobSpec, JobState
from master.store.db import connect_reader, connect_writer, migrate
from master.store.reads import Reader, ReaderPool
from master.store.rows import JOB_INSERT_ARITY, JOB_INSERT_COLUMNS, JobRow, job_insert_params

TYPES = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "A3C", "Transformer (batch size 64)")
LIVE = "WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING') ORDER BY seq"


def seed(path: pathlib.Path, jobs: int, running: int) -> None:
    conn = connect_writer(path)
    migrate(conn)
    rows = []
    for i in range(jobs):
        spec = JobSpec(("python", "train.py"), gpus=1, job_type=TYPES[i % len(TYPES)], owner="alice")
        rows.append(
            job_insert_params(Job(f"j{i:07d}", spec, JobState.PENDING, submitted_at=i, updated_at=i), None)
        )
    marks = ",".join("?" * JOB_INSERT_ARITY)
    conn.executemany(f"INSERT INTO jobs {JOB_INSERT_COLUMNS} VALUES ({marks})", rows)
    conn.execute(
        "UPDATE jobs SET state = 'RUNNING', attempt = 1, node = 'n' || (seq / 8),"
        " gpus = json_array('GPU-' || seq) WHERE seq <= ?",
        (running,),
    )
    conn.commit()
    conn.close()


async def timed(fn: Callable[[], Awaitable[list[JobRow]]], repeat: int) -> float:
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        ms.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(ms)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=12_500)
    ap.add_argument("--running", type=int, default=2_500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "horus.db"
        seed(path, args.jobs, args.running)
        conn = await connect_reader(path)
        try:
            reader = Reader(ReaderPool([conn]))
            await reader.live_jobs()  # the first pass decodes everything
            live = await timed(reader.live_jobs, args.repeat)
            writer = connect_writer(path)
            changed = []
            for step in range(args.repeat):  # a quarter of the rows change before each pass
                writer.execute("UPDATE jobs SET reason = ?, updated_at = updated_at + 1 WHERE seq % 4 = ?",
                               (f"step {step}", step % 4))  # fmt: skip
                writer.commit()
                changed.append(await timed(reader.live_jobs, 1))
            writer.close()
            full = await timed(lambda: reader._jobs(LIVE, ()), args.repeat)
        finally:
            await conn.close()
    base = {"bench": "live_read", "jobs": args.jobs, "running": args.running}
    print(json.dumps({**base, "read": "live", "changed": 0.0, "ms": round(live, 1)}))
    print(json.dumps({**base, "read": "live", "changed": 0.25, "ms": round(statistics.median(changed), 1)}))
    print(json.dumps({**base, "read": "json", "ms": round(full, 1)}))
    print(json.dumps({**base, "ratio": "json/live", "value": round(full / live, 2)}))


if __name__ == "__main__":
    asyncio.run(main())
