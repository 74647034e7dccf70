"""Master pass benchmark: one whole scheduling pass of the live master, phase by phase.

A real store (SQLite file in a temp dir) and the master's own services (``Core``, the live-job
index, ``Scheduler`` with the ``horus`` policy and the packaged interference model) on G V100s
(8 per node, every node connected through a real ``Session``), holding J live jobs (GPU counts
drawn from the Philly trace, Gavel job types). The first pass assigns what fits; each measured
pass follows a tick of churn (1 % of the active jobs finish through worker updates, as many new
jobs arrive), then ``Scheduler.run_once()`` runs: ``read`` (the live jobs from the index),
``decide`` (``policy.decide``), ``commit`` (check the actions, commit the transitions in one
transaction, index them, dispatch). The in-run reference is ``db_read_ms``: the same live rows
read from SQLite (``Reader.live_jobs()``), which is what a pass used to read; it is read after
the measured passes (read between them, its decoded rows went through the collector's
generations that the next pass then walked), as often as there were passes.

The process runs with the collector settings ``horus-master`` applies once it has started
(``master/gctune.py``: a young collection every 20,000 allocations instead of 700, start-up
objects frozen), applied here once the master's services are built and before the jobs arrive
(so no job is frozen). ``--python-gc`` keeps Python's defaults instead, as an in-process test
has them; the JSON says which (``gc``).

    python bench/master_pass.py [--jobs 12500] [--gpus 8192] [--repeat 7]
    python bench/master_pass.py --backends sqlite,postgresql --pg URL   # both stores, one after the other

``--backends postgresql``: the store on a fresh PostgreSQL database on the server ``--pg`` (default
$HORUS_TEST_PG) names, the master leading by the lease, so every write transaction starts with
the leader's fence as in production (docs/ha.md); with two backends a ratio line follows.

One JSON line: {"bench": "master_pass", "jobs", "gpus", "ms", "read_ms", "decide_ms",
"commit_ms", "cpu_ms", "db_read_ms", "first_ms", ...}; ``ms`` and the phases are medians over the
passes (wall time); ``cpu_ms`` is the pass's process CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator

import asyncpg
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from pgdb import fresh_database
from placement import gpu_counts, v100_nodes

from horus_core.interference import default_model
from horus_core.model import Job, JobSpec, JobState, NodeState
from horus_core.policies import make_policy
from horus_core.testing import FakeClock
from master import gctune
from master.app import scheduler_for
from master.config import MasterConfig
from master.learning.learner import Learner
from master.services import transitions as tr
from master.services.core import Core
from master.services.events import EventBus
from master.services.logs import LogStore
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.scheduler import PassResult, Scheduler
from master.services.session import Session
from master.store import Store
from master.store import lease as leases
from master.store.lease import Fence
from master.store.pgstore import migrate
from master.store.rows import JobRow


async def build(tmp: pathlib.Path, gpus: int, url: str = "") -> tuple[Core, Scheduler]:
    clock = FakeClock()
    cfg = MasterConfig(db_path=tmp / "horus.db", db_url=url, listen="127.0.0.1:0")
    fence = None
    if url:  # lead by the lease, as a master over PostgreSQL does
        conn = await asyncpg.connect(url)
        await migrate(conn)
        fence = Fence()
        fence.term = await leases.try_acquire(conn, "bench", "127.0.0.1:0", 3600.0)
        await conn.close()
    store = await Store.open(cfg.db, fence=fence)
    model = default_model()
    learner = Learner(store, clock, model, settle_s=2 * cfg.heartbeat_s)
    registry = NodeRegistry()
    for node in v100_nodes(gpus):
        entry = NodeEntry(node.name, node.gpus, NodeState.READY, clock.now(), session=Session(node.name))
        registry.put(entry)
    core = Core(cfg, store, clock, registry, EventBus(), LogStore(cfg.logs_dir, 1 << 20), learner)
    await core.writer.load_live()

    async def no_liveness() -> None:
        return None

    return core, scheduler_for(core, make_policy("horus", model), no_liveness)


async def submit(core: Core, n: int, counts: np.ndarray, types: list[str], rng: np.random.Generator) -> None:
    now = core.clock.now()
    shapes = zip(rng.choice(counts, n).tolist(), rng.integers(0, len(types), n).tolist(), strict=True)
    # Ids from the run's seed, as new_job_id() draws them: the queue breaks ties by id, so random
    # ids made each run place different jobs (80 to 130 a pass) and the figures wander with them.
    ids = [f"{i:012x}" for i in rng.integers(0, 1 << 48, n).tolist()]
    jobs = [
        Job(job_id, JobSpec(("x",), gpus=g, job_type=types[t]), JobState.PENDING, submitted_at=now,
            updated_at=now)
        for job_id, (g, t) in zip(ids, shapes, strict=True)
    ]  # fmt: skip
    for lo in range(0, n, 1000):
        await asyncio.gather(*(core.writer.submit(j, None) for j in jobs[lo : lo + 1000]))


async def finish_some(core: Core, rng: np.random.Generator) -> int:
    """1 % of the active jobs succeed, as their workers would report it."""
    active = core.live.active()
    picked = rng.choice(len(active), len(active) // 100, replace=False).tolist() if active else []
    now = core.clock.now()
    todo = []
    for i in picked:
        job = active[i]
        fn = tr.worker_update(job.node, job.attempt, JobState.SUCCEEDED, 0, "", now, tr.UpdateVerdict())
        todo.append((job.id, fn))
    return len(await core.writer.apply(todo))


def check(rows: list[JobRow], core: Core) -> None:
    """The index holds what the database holds (else the timings would compare different work)."""
    if [r.job for r in rows] != [r.job for r in core.live.rows()]:  # (jobs() would be cached for the pass)
        raise AssertionError("the live index and the database differ")


@contextlib.asynccontextmanager
async def database(backend: str, pg: str) -> AsyncIterator[str]:
    """ "" for SQLite (a file in the run's folder), else a fresh PostgreSQL database's URL."""
    if backend == "sqlite":
        yield ""
        return
    async with fresh_database(pg) as url:
        yield url


async def run(args: argparse.Namespace, backend: str = "sqlite") -> dict[str, object]:
    async with database(backend, args.pg) as url:
        return {**(await run_on(args, url)), "backend": backend}


async def run_on(args: argparse.Namespace, url: str) -> dict[str, object]:
    rng = np.random.default_rng(args.seed)
    counts = gpu_counts(pathlib.Path(args.data))
    types = default_model().known_job_types()
    with tempfile.TemporaryDirectory() as tmp:
        core, scheduler = await build(pathlib.Path(tmp), args.gpus, url)
        if not args.python_gc:
            gctune.tune()  # (as horus-master does once started: master/main.py)
        try:
            await submit(core, args.jobs, counts, types, rng)
            t0 = time.perf_counter()
            first = await scheduler.run_once()
            first_ms = (time.perf_counter() - t0) * 1000.0
            passes: list[tuple[float, PassResult]] = []
            db_read: list[float] = []
            cpu: list[float] = []  # process CPU time of each pass (less sensitive to a busy machine)
            for _ in range(args.repeat):
                core.clock.advance(10.0)  # type: ignore[attr-defined]
                await submit(core, await finish_some(core, rng), counts, types, rng)
                t0, c0 = time.perf_counter(), time.process_time()
                result = await scheduler.run_once()
                passes.append(((time.perf_counter() - t0) * 1000.0, result))
                cpu.append((time.process_time() - c0) * 1000.0)
            # The reference after the passes: its 12,500 decoded rows, read before each pass,
            # filled the collector's generations that the next pass then paid to walk.
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                rows = await core.store.read.live_jobs()
                db_read.append((time.perf_counter() - t0) * 1000.0)
                check(rows, core)
                del rows
        finally:
            await core.store.close()

    def med(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    return {
        "bench": "master_pass",
        "jobs": len(core.live),
        "gpus": args.gpus,
        "ms": med([ms for ms, _ in passes]),
        "read_ms": med([r.read_s * 1000.0 for _, r in passes]),
        "decide_ms": med([r.decide_s * 1000.0 for _, r in passes]),
        "commit_ms": med([r.commit_s * 1000.0 for _, r in passes]),
        "cpu_ms": med(cpu),
        "db_read_ms": med(db_read),
        "first_ms": round(first_ms, 1),
        "first_assigned": first.assigned,
        "assigned_per_pass": med([float(r.assigned) for _, r in passes]),
        "passes": len(passes),
        "gc": "python" if args.python_gc else "master",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    repo = pathlib.Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(repo / ".." / "shared" / "data" / "gavel"))
    ap.add_argument("--jobs", type=int, default=12_500)
    ap.add_argument("--gpus", type=int, default=8_192)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--python-gc", action="store_true", help="Python's collector defaults, not the master's")
    ap.add_argument("--backends", default="sqlite", help="sqlite and/or postgresql")
    ap.add_argument("--pg", default=os.environ.get("HORUS_TEST_PG", ""), help="PostgreSQL server URL")
    args = ap.parse_args()
    backends = args.backends.split(",")
    if "postgresql" in backends and not args.pg:
        ap.error("--backends postgresql needs --pg URL (or $HORUS_TEST_PG; bash scripts/pg-dev.sh)")
    results = []
    for backend in backends:
        results.append(asyncio.run(run(args, backend)))
        print(json.dumps(results[-1]), flush=True)
    if len(results) == 2:
        a, b = results
        for key in ("ms", "commit_ms", "read_ms"):
            x = round(float(b[key]) / max(float(a[key]), 1e-9), 2)  # type: ignore[arg-type]
            print(
                json.dumps(
                    {"bench": "master_pass", "ratio": f"{backends[1]}/{backends[0]}", "of": key, "x": x}
                )
            )


if __name__ == "__main__":
    main()
