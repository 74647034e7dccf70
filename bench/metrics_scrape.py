"""What a Prometheus scrape and a dashboard page cost the master, against ``hctl queue``'s read.

    .venv/bin/python bench/metrics_scrape.py [--jobs 10000] [--repeat 7]

A real master (SQLite file, gRPC and HTTP on 127.0.0.1) over ``--jobs`` pending jobs. Measured over
real HTTP / gRPC in the same run, median ms: ``metrics`` (GET /metrics), ``queue_page``
(GET /queue), and the reference ``list_pending`` (the SDK listing every pending job, as
``hctl queue`` does). One JSON line per measurement, then the ratios.
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

import aiohttp

from horus_core import HorusClient
from horus_core.model import Job, JobSpec, JobState
from master.app import Master
from master.config import MasterConfig
from master.store.db import connect_writer, migrate
from master.store.rows import JOB_INSERT_ARITY, JOB_INSERT_COLUMNS, job_insert_params

TYPES = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "A3C", "Transformer (batch size 64)")


def seed(path: pathlib.Path, jobs: int) -> None:
    conn = connect_writer(path)
    migrate(conn)
    rows = []
    for i in range(jobs):
        spec = JobSpec(("python", "train.py"), gpus=1, job_type=TYPES[i % len(TYPES)], owner="alice")
        job = Job(
            f"j{i:07d}",
            spec,
            JobState.PENDING,
            submitted_at=i,
            updated_at=i,
            reason=f"queued behind {i} jobs",
        )
        rows.append(job_insert_params(job, None))
    marks = ",".join("?" * JOB_INSERT_ARITY)
    conn.executemany(f"INSERT INTO jobs {JOB_INSERT_COLUMNS} VALUES ({marks})", rows)
    conn.commit()
    conn.close()


async def timed(fn: Callable[[], Awaitable[object]], repeat: int) -> float:
    await fn()  # warm
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        ms.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(ms)


async def measure(db: pathlib.Path, jobs: int, repeat: int) -> dict[str, float]:
    cfg = MasterConfig(db_path=db, listen="127.0.0.1:0", tick_s=3600.0, shutdown_grace_s=0.2)
    master = Master(cfg, http_listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")
    async with (
        master as m,
        aiohttp.ClientSession() as http,
        HorusClient.connect(f"127.0.0.1:{m.port}") as client,
    ):

        async def fetch(url: str) -> bytes:
            async with http.get(url) as resp:
                assert resp.status == 200
                return await resp.read()

        async def pending() -> int:
            return len(await client.list(states=(JobState.PENDING,)))

        assert await pending() == jobs
        return {
            "metrics": await timed(lambda: fetch(f"http://127.0.0.1:{m.http.metrics_port}/metrics"), repeat),
            "queue_page": await timed(lambda: fetch(f"http://127.0.0.1:{m.http.http_port}/queue"), repeat),
            "list_pending": await timed(pending, repeat),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "horus.db"
        seed(db, args.jobs)
        got = asyncio.run(measure(db, args.jobs, args.repeat))
    for what, ms in got.items():
        print(
            json.dumps(
                {"bench": "metrics_scrape", "what": what, "jobs": args.jobs, "median_ms": round(ms, 2)}
            )
        )
    ref = got["list_pending"]
    print(
        json.dumps(
            {
                "bench": "metrics_scrape",
                "reference": "list_pending",
                "metrics_over_reference": round(got["metrics"] / ref, 3),
                "queue_page_over_reference": round(got["queue_page"] / ref, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
