"""Load: one real master (``python -m master.main``, SQLite file), many simulated workers, clients
submitting jobs, and the list calls operators make, on a database of many jobs.

Each run: pre-fill the database with finished jobs (the documented bulk path below), start the
master, start ``--procs`` processes of bench/load_workers.py holding the workers' streams (each
heartbeating at the master's default interval, 2 s), wait until all registered and a heartbeat
interval more, submit ``--jobs`` jobs through SubmitJob from ``--submitters`` concurrent clients
(the first 1 % as a warm-up; then GetServerStats(reset) starts the master's windows afresh),
then time ``hctl jobs``' first page (ListJobs, live states), ``hctl jobs --all``'s first page and
ListNodes while the workers keep heartbeating, and read GetServerStats: the master's heartbeat
handling time (stream read to handled) and its event-loop lag. A reference run with fewer
workers, jobs and stored jobs (``--ref-*``) comes in the same invocation; ratios follow.

Bulk path: the database gets ``db_jobs - jobs`` SUCCEEDED jobs (one INSERT per 1,000 rows, the
schema's own migrations and spec encoding) before the master starts, so that with the submitted
jobs it holds ``db_jobs``. Prints JSON lines, one per figure, e.g.
``{"bench": "load", "run": "load", "figure": "heartbeat", "p99_ms": 3.1, "target_ms": 50, ...}``.

    python bench/load.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from submit import cpu_seconds  # (bench/submit.py: bench scripts run with bench/ on sys.path)

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.model import JobSpec
from master.loopmon import LoopMonitor
from master.store.db import connect_writer, migrate
from master.store.rows import spec_to_json

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGETS_MS = {"heartbeat": 50.0, "loop_lag": 100.0, "list_jobs": 1000.0, "list_jobs_all": 1000.0}
TARGETS_MS["list_nodes"] = 1000.0
JOB_TYPES = ("ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)", "LM (batch size 20)")
LIVE = [pb.JOB_STATE_PENDING, pb.JOB_STATE_ASSIGNED, pb.JOB_STATE_RUNNING]  # what `hctl jobs` lists


@dataclass(frozen=True)
class Scale:
    run: str
    workers: int
    jobs: int
    db_jobs: int


def prefill(db: pathlib.Path, n: int) -> None:
    """``n`` finished jobs written straight into a fresh database (the bulk path)."""
    conn = connect_writer(db)
    migrate(conn)
    rng = random.Random(n)
    now = time.time()
    rows = []
    for i in range(n):
        spec = JobSpec(command=("python", "train.py"), gpus=1, name=f"hist-{i}", owner="history",
                       job_type=JOB_TYPES[i % len(JOB_TYPES)])  # fmt: skip
        t = now - 86_400 + i * 0.5
        node = f"old-{rng.randrange(100):03d}"
        rows.append((f"h{i:011x}", "history", spec_to_json(spec), t, t + 60, t + 1, t + 60, node,
                     json.dumps([f"GPU-{node}-0"])))  # fmt: skip
    conn.execute("BEGIN IMMEDIATE")
    for k in range(0, n, 1000):
        conn.executemany(
            "INSERT INTO jobs (id, owner, spec, state, attempt, submitted_at, updated_at, started_at,"
            " finished_at, node, gpus, exit_code) VALUES (?, ?, ?, 'SUCCEEDED', 1, ?, ?, ?, ?, ?, ?, 0)",
            rows[k : k + 1000],
        )
    conn.execute("COMMIT")
    conn.close()


@contextlib.asynccontextmanager
async def master(db: pathlib.Path) -> AsyncIterator[tuple[int, int]]:
    level = os.environ.get("BENCH_MASTER_LOG", "WARNING")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "master.main", "--listen", "127.0.0.1:0", "--db", str(db),
        "--log-level", level, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
        yield int(line.rsplit(":", 1)[1]), proc.pid
    finally:
        proc.terminate()
        await proc.wait()


@contextlib.asynccontextmanager
async def workers(port: int, n: int, procs: int, job_s: float) -> AsyncIterator[list[dict[str, int]]]:
    """``n`` simulated workers in ``procs`` processes; yields once all registered. The list it
    yields is filled with each process's counts after the block."""
    split = [n // procs + (1 if p < n % procs else 0) for p in range(procs)]
    children = []
    first = 0
    for p, count in enumerate(c for c in split if c):
        children.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(ROOT / "bench" / "load_workers.py"),
                "--port",
                str(port),
                "--first",
                str(first),
                "--count",
                str(count),
                "--job-s",
                str(job_s),
                "--seed",
                str(p),
                cwd=ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        )
        first += count
    counts: list[dict[str, int]] = []
    try:
        for child, count in zip(children, (c for c in split if c), strict=True):
            assert child.stdout is not None
            ready = json.loads(await asyncio.wait_for(child.stdout.readline(), 300))
            if ready["ready"] != count:
                raise RuntimeError(f"only {ready['ready']} of {count} simulated workers registered")
        yield counts
    finally:
        for child in children:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.close()
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            if line.strip():
                counts.append(json.loads(line))
            await child.wait()


async def submit_all(port: int, jobs: range, submitters: int, rate: float = 0.0) -> list[float]:
    """Submit jobs numbered ``jobs`` from ``submitters`` concurrent clients, as fast as they are
    acknowledged or, with ``rate``, job k of them not before k / rate s; each one's latency (s)."""
    latencies: list[float] = []
    todo = iter(jobs)
    start = time.perf_counter()

    async def client(cid: int) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = cgrpc.HorusServiceStub(channel)
            for i in todo:
                if rate > 0:
                    await asyncio.sleep(start + (i - jobs.start) / rate - time.perf_counter())
                spec = pb.JobSpec(command=["python", "train.py"], gpus=1 + (i % 10 == 0), name=f"load-{i}",
                                  job_type=JOB_TYPES[i % len(JOB_TYPES)])  # fmt: skip
                t0 = time.perf_counter()
                resp = await stub.SubmitJob(cpb.SubmitJobRequest(request_id=f"load-{i}", spec=spec))
                latencies.append(time.perf_counter() - t0)
                assert resp.created

    await asyncio.gather(*(client(c) for c in range(submitters)))
    return latencies


async def time_calls(calls: dict[str, Callable[[], Awaitable[Any]]], repeat: int) -> dict[str, list[float]]:
    """Each call ``repeat`` times, interleaved; latencies (s) per name."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            t0 = time.perf_counter()
            await call()
            out[name].append(time.perf_counter() - t0)
    return out


def summary(latencies_s: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_s)
    p50, p99, top = (ordered[max(0, -(-q * len(ordered) // 100) - 1)] for q in (50, 99, 100))
    return {"n": len(ordered), "p50_ms": round(p50 * 1000, 2), "p99_ms": round(p99 * 1000, 2),
            "max_ms": round(top * 1000, 2)}  # fmt: skip


def latency(msg: cpb.LatencySummary) -> dict[str, float]:
    return {"n": msg.samples, "p50_ms": round(msg.p50_ms, 2), "p99_ms": round(msg.p99_ms, 2),
            "max_ms": round(msg.max_ms, 2)}  # fmt: skip


async def measure(port: int, args: argparse.Namespace, scale: Scale) -> tuple[dict[str, Any], dict[str, Any]]:
    """The load phase against a master whose workers are registered: figures and counts."""
    warm = max(10, scale.jobs // 100)
    await submit_all(port, range(warm), args.submitters)  # the first passes load the policy's code
    await asyncio.sleep(args.settle_s)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = cgrpc.HorusServiceStub(channel)
        await stub.GetServerStats(cpb.GetServerStatsRequest(reset=True))  # the windows: this phase
        probe = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--idle-probe",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert probe.stdout is not None
        await asyncio.wait_for(probe.stdout.readline(), 60)  # its monitor runs
        t0 = time.perf_counter()
        subs = await submit_all(port, range(warm, scale.jobs), args.submitters, args.submit_rate)
        submit_s = time.perf_counter() - t0
        lists = await time_calls(
            {
                "list_jobs": lambda: stub.ListJobs(cpb.ListJobsRequest(states=LIVE, page_size=100)),
                "list_jobs_all": lambda: stub.ListJobs(cpb.ListJobsRequest(page_size=100)),
                "list_nodes": lambda: stub.ListNodes(cpb.ListNodesRequest()),
            },
            args.list_calls,
        )
        nodes = await stub.ListNodes(cpb.ListNodesRequest())
        await asyncio.sleep(t0 + args.settle_s - time.perf_counter())  # at least a heartbeat interval
        stats = await stub.GetServerStats(cpb.GetServerStatsRequest())
    idle, _ = await probe.communicate(b"")
    figures: dict[str, Any] = {
        "heartbeat": latency(stats.heartbeat),
        "loop_lag": latency(stats.loop_lag),
        "idle_loop_lag": json.loads(idle),  # the same monitor in an idle process: the machine's share
        "submit": {**summary(subs), "per_s": round(len(subs) / submit_s, 1)},
        **{name: summary(v) for name, v in lists.items()},
    }
    counts = {"nodes": len(nodes.nodes), "nodes_connected": stats.nodes_connected,
              "heartbeats_handled": stats.heartbeat.total, "submitted": warm + len(subs),
              "warmup": warm}  # fmt: skip
    return figures, counts


async def run(scale: Scale, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "load.db"
        t0 = time.perf_counter()
        prefill(db, scale.db_jobs - scale.jobs)
        prefill_s = time.perf_counter() - t0
        async with master(db) as (port, pid):
            t1 = time.perf_counter()
            async with workers(port, scale.workers, min(args.procs, scale.workers), args.job_s) as sent:
                register_s = time.perf_counter() - t1
                await asyncio.sleep(args.settle_s)  # every worker has heartbeated
                cpu0 = cpu_seconds(pid)
                figures, counts = await measure(port, args, scale)
                cpu = cpu_seconds(pid) - cpu0
        with sqlite3.connect(db) as conn:  # after the master stopped
            stored = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    counts.update({k: sum(c[k] for c in sent) for k in ("registered", "heartbeats", "assigned", "finished")})
    counts.update({"stored_jobs": stored, "prefill_s": round(prefill_s, 2),
                   "register_s": round(register_s, 2), "master_cpu_s": round(cpu, 2),
                   "load1": round(os.getloadavg()[0], 2)})  # fmt: skip
    return figures, counts


def emit(**fields: Any) -> None:
    print(json.dumps({"bench": "load", **fields}), flush=True)


def report(scale: Scale, figures: dict[str, Any], stat: str | None = None) -> None:
    for name, f in figures.items():
        target = TARGETS_MS.get(name)
        extra = {"target_ms": target, "met": f["p99_ms"] <= target} if target is not None else {}
        emit(run=scale.run, workers=scale.workers, jobs=scale.jobs, db_jobs=scale.db_jobs, figure=name,
             **f, **extra, **({"stat": stat} if stat else {}))  # fmt: skip


def median_figures(reps: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("p50_ms", "p99_ms", "max_ms")
    return {name: {k: statistics.median(r[name][k] for r in reps) for k in keys} for name in reps[0]}


def scales(args: argparse.Namespace) -> tuple[Scale, Scale]:
    if args.quick:
        return Scale("load", 100, 1000, 10_000), Scale("reference", 10, 100, 1000)
    return (
        Scale("load", args.workers, args.jobs, args.db_jobs),
        Scale("reference", args.ref_workers, args.ref_jobs, args.ref_db_jobs),
    )


async def idle_probe() -> None:
    """The master's loop monitor in a process that does nothing else, until stdin closes: how
    late an idle event loop wakes on this machine right now (other processes' load)."""
    mon = LoopMonitor()
    task = asyncio.create_task(mon.run())
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    task.cancel()
    s = mon.snapshot()
    print(
        json.dumps({"n": s.samples, "p50_ms": s.p50_ms, "p99_ms": s.p99_ms, "max_ms": s.max_ms}), flush=True
    )


async def main() -> None:
    if sys.argv[1:] == ["--idle-probe"]:
        return await idle_probe()
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="100 workers, 1,000 jobs, 10,000 stored (ref: 10/100/1,000)"
    )
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--db-jobs", type=int, default=100_000, help="jobs in the database at the list calls")
    ap.add_argument("--ref-workers", type=int, default=10)
    ap.add_argument("--ref-jobs", type=int, default=1000)
    ap.add_argument("--ref-db-jobs", type=int, default=1000)
    ap.add_argument("--procs", type=int, default=4, help="processes holding the simulated workers")
    ap.add_argument("--submitters", type=int, default=8, help="concurrent submitting clients")
    ap.add_argument(
        "--submit-rate", type=float, default=0.0, help="jobs/s in all (0: as fast as acknowledged)"
    )
    ap.add_argument("--list-calls", type=int, default=20, help="timed calls of each list RPC")
    ap.add_argument("--job-s", type=float, default=20.0, help="mean run time of a simulated attempt")
    ap.add_argument("--settle-s", type=float, default=2.5, help="pause after registration (> 1 heartbeat)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per scale (interleaved); medians follow")
    args = ap.parse_args()
    load, ref = scales(args)
    if load.db_jobs < load.jobs or ref.db_jobs < ref.jobs:
        ap.error("--db-jobs must be at least --jobs (the database holds the submitted jobs too)")
    done: dict[str, list[dict[str, Any]]] = {load.run: [], ref.run: []}
    for rep in range(args.repeat):
        for scale in (ref, load):
            figures, counts = await run(scale, args)
            done[scale.run].append(figures)
            report(scale, figures)
            emit(run=scale.run, what="counts", rep=rep, workers=scale.workers, jobs=scale.jobs,
                 db_jobs=scale.db_jobs, **counts)  # fmt: skip
    med = {run: median_figures(reps) for run, reps in done.items()}
    if args.repeat > 1:
        for scale in (ref, load):
            report(scale, med[scale.run], stat=f"median of {args.repeat}")
    for name in med[load.run]:
        a, b = med[load.run][name]["p99_ms"], med[ref.run][name]["p99_ms"]
        emit(ratio="load/reference", figure=name, stat="p99_ms", x=round(a / max(b, 1e-3), 2))


if __name__ == "__main__":
    asyncio.run(main())
