"""Acknowledged submissions per second over gRPC against a real master subprocess.

Compares durable group commit (the default) with a commit per request (``--no-group-commit``)
at 1, 16 and 128 concurrent clients, side by side in one run. Prints JSON lines, e.g.
``{"bench": "submit", "mode": "group", "clients": 128, "per_s": 2400.0, "n": 7200, ...}``.

    python bench/submit.py [--seconds 3] [--clients 1,16,128] [--repeat 3] [--modes group,per_request]
    python bench/submit.py --backends sqlite,postgresql --pg URL --modes group --clients 128 --repeat 3

``--backends``: the store the master runs on; PostgreSQL takes a fresh database for each run on
the server ``--pg`` (default $HORUS_TEST_PG) names, and the master leads by the lease as in
production (docs/ha.md). Each line has the p50/p99 latency of the acknowledged submissions; with
two backends a ``postgresql/sqlite`` ratio line follows each setting.

Each run starts a fresh master on a fresh database; after it stops, the database is reopened to
check that every acknowledged submission is stored. ``master_cpu_us_per_submit`` is the master
process's CPU time per stored job (all threads). BENCH_MASTER_LOG=INFO shows the master's log,
including its commit count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import grpc
from pgdb import fresh_database

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux), 0.0 where unknown."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


@asynccontextmanager
async def master(db: pathlib.Path | str, group: bool) -> AsyncIterator[tuple[int, int]]:
    extra = [] if group else ["--no-group-commit"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "master.main",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(db),
        "--log-level",
        os.environ.get("BENCH_MASTER_LOG", "WARNING"),
        *extra,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        port = int(line.rsplit(":", 1)[1])
        await leading(port)
        yield port, proc.pid
    finally:
        proc.terminate()
        await proc.wait()


async def leading(port: int, within_s: float = 60.0) -> None:
    """Until the master answers (over PostgreSQL it stands by until it holds the lease)."""
    deadline = time.monotonic() + within_s
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = cgrpc.HorusServiceStub(channel)
        while True:
            try:
                await stub.GetClusterInfo(cpb.GetClusterInfoRequest(), timeout=5)
                return
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)


async def client(
    port: int, cid: int, stop_at: list[float], counts: list[int], latencies: list[float]
) -> None:
    spec = pb.JobSpec(
        command=["python", "train.py", "--epochs", "10"],
        gpus=1,
        name=f"bench-{cid}",
        job_type="ResNet-18 (batch size 32)",
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = cgrpc.HorusServiceStub(channel)
        i = 0
        while time.perf_counter() < stop_at[0]:
            sent = time.perf_counter()
            resp = await stub.SubmitJob(cpb.SubmitJobRequest(request_id=f"c{cid}-{i}", spec=spec))
            assert resp.created
            i += 1
            now = time.perf_counter()
            if now >= stop_at[1]:  # past the warm-up: count it
                counts[cid] += 1
                latencies.append(now - sent)


@asynccontextmanager
async def database(backend: str, pg: str) -> AsyncIterator[pathlib.Path | str]:
    """A fresh database: a SQLite file, or a new PostgreSQL database (dropped afterwards)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield pathlib.Path(tmp) / "bench.db"
        return
    async with fresh_database(pg) as url:
        yield url


async def stored_jobs(db: pathlib.Path | str) -> int:
    if isinstance(db, str):
        conn = await asyncpg.connect(db)
        try:
            return int(await conn.fetchval("SELECT COUNT(*) FROM jobs"))
        finally:
            await conn.close()
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(
    mode: str, clients: int, seconds: float, warmup: float, backend: str = "sqlite", pg: str = ""
) -> dict[str, object]:
    async with database(backend, pg) as db:
        async with master(db, mode == "group") as (port, pid):
            counts = [0] * clients
            latencies: list[float] = []
            start = time.perf_counter()
            stop_at = [start + warmup + seconds, start + warmup]
            cpu0 = cpu_seconds(pid)
            await asyncio.gather(*(client(port, c, stop_at, counts, latencies) for c in range(clients)))
            elapsed = time.perf_counter() - stop_at[1]
            cpu = cpu_seconds(pid) - cpu0
        stored = await stored_jobs(db)  # after the master stopped: every acknowledged job is stored
    n = sum(counts)
    assert stored >= n, (stored, n)
    return {
        "bench": "submit",
        "backend": backend,
        "mode": mode,
        "p50_ms": round(percentile(latencies, 0.5) * 1e3, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1e3, 2),
        "clients": clients,
        "per_s": round(n / elapsed, 1),
        "n": n,
        "seconds": round(elapsed, 2),
        "stored": stored,
        "unit": "acknowledged submissions/s",
        "master_cpu_us_per_submit": round(cpu / max(stored, 1) * 1e6, 1),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--clients", default="1,16,128")
    ap.add_argument("--repeat", type=int, default=1, help="runs per setting (interleaved); medians follow")
    ap.add_argument("--modes", default="group,per_request", help="group (commit) and/or per_request")
    ap.add_argument("--backends", default="sqlite", help="sqlite and/or postgresql")
    ap.add_argument("--pg", default=os.environ.get("HORUS_TEST_PG", ""), help="PostgreSQL server URL")
    args = ap.parse_args()
    backends, modes = args.backends.split(","), args.modes.split(",")
    if "postgresql" in backends and not args.pg:
        ap.error("--backends postgresql needs --pg URL (or $HORUS_TEST_PG; bash scripts/pg-dev.sh)")
    for clients in (int(c) for c in args.clients.split(",")):
        rates: dict[tuple[str, str], list[float]] = {(b, m): [] for b in backends for m in modes}
        p99: dict[tuple[str, str], list[float]] = {k: [] for k in rates}
        for rep in range(args.repeat):
            for backend, mode in rates:
                result = await run(mode, clients, args.seconds, args.warmup, backend, args.pg)
                rates[(backend, mode)].append(float(result["per_s"]))  # type: ignore[arg-type]
                p99[(backend, mode)].append(float(result["p99_ms"]))  # type: ignore[arg-type]
                print(json.dumps({**result, "rep": rep}), flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        if args.repeat > 1:
            for (backend, mode), v in med.items():
                print(json.dumps({
                    "bench": "submit", "backend": backend, "mode": mode, "clients": clients, "per_s": v,
                    "p99_ms": statistics.median(p99[(backend, mode)]), "stat": f"median of {args.repeat}",
                    "unit": "acknowledged submissions/s",
                }))  # fmt: skip
        for b in backends:
            if "group" in modes and "per_request" in modes:
                x = med[(b, "group")] / max(med[(b, "per_request")], 1e-9)
                ratio = {"ratio": "group/per_request", "backend": b, "clients": clients, "x": round(x, 2)}
                print(json.dumps({"bench": "submit", **ratio}), flush=True)
        if len(backends) == 2:
            for m in modes:
                x = med[(backends[1], m)] / max(med[(backends[0], m)], 1e-9)
                ratio = {
                    "ratio": f"{backends[1]}/{backends[0]}",
                    "mode": m,
                    "clients": clients,
                    "x": round(x, 2),
                }
                print(json.dumps({"bench": "submit", **ratio}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
