"""Acknowledged submissions per second over gRPC against a real master subprocess.

Compares durable group commit (the default) with a commit per request (``--no-group-commit``)
at 1, 16 and 128 concurrent clients, side by side in one run. Prints JSON lines, e.g.
``{"bench": "submit", "mode": "group", "clients": 128, "per_s": 2400.0, "n": 7200, ...}``.

    python bench/submit.py [--seconds 3] [--clients 1,16,128] [--repeat 3]

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

import grpc

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
async def master(db: pathlib.Path, group: bool) -> AsyncIterator[tuple[int, int]]:
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
        yield int(line.rsplit(":", 1)[1]), proc.pid
    finally:
        proc.terminate()
        await proc.wait()


async def client(port: int, cid: int, stop_at: list[float], counts: list[int]) -> None:
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
            resp = await stub.SubmitJob(cpb.SubmitJobRequest(request_id=f"c{cid}-{i}", spec=spec))
            assert resp.created
            i += 1
            if time.perf_counter() >= stop_at[1]:  # past the warm-up: count it
                counts[cid] += 1


async def run(mode: str, clients: int, seconds: float, warmup: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "bench.db"
        async with master(db, mode == "group") as (port, pid):
            counts = [0] * clients
            start = time.perf_counter()
            stop_at = [start + warmup + seconds, start + warmup]
            cpu0 = cpu_seconds(pid)
            await asyncio.gather(*(client(port, c, stop_at, counts) for c in range(clients)))
            elapsed = time.perf_counter() - stop_at[1]
            cpu = cpu_seconds(pid) - cpu0
        with sqlite3.connect(db) as conn:  # after the master stopped: every acknowledged job is stored
            stored = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    n = sum(counts)
    assert stored >= n, (stored, n)
    return {
        "bench": "submit",
        "mode": mode,
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
    args = ap.parse_args()
    for clients in (int(c) for c in args.clients.split(",")):
        rates: dict[str, list[float]] = {"group": [], "per_request": []}
        for rep in range(args.repeat):
            for mode in rates:
                result = await run(mode, clients, args.seconds, args.warmup)
                rates[mode].append(float(result["per_s"]))  # type: ignore[arg-type]
                print(json.dumps({**result, "rep": rep}), flush=True)
        med = {mode: statistics.median(v) for mode, v in rates.items()}
        if args.repeat > 1:
            for mode, v in med.items():
                print(
                    json.dumps(
                        {
                            "bench": "submit",
                            "mode": mode,
                            "clients": clients,
                            "per_s": v,
                            "stat": f"median of {args.repeat}",
                            "unit": "acknowledged submissions/s",
                        }
                    )
                )
        print(
            json.dumps(
                {
                    "bench": "submit",
                    "ratio": "group/per_request",
                    "clients": clients,
                    "x": round(med["group"] / max(med["per_request"], 1e-9), 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
