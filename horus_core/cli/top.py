"""``hctl top``: per-GPU and per-job utilisation and memory, refreshed until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import datetime
from typing import Any

from horus_core.cli import output as fmt
from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.cluster import gpu_row, sort_gpus
from horus_core.cli.output import Output
from horus_core.cli.records import gpu_status_record, job_gpu_stats_record
from horus_core.client import GpuStatus, HorusClient
from horus_core.model import Job, JobState

CLEAR = "\x1b[H\x1b[2J"
ACTIVE = (JobState.ASSIGNED, JobState.RUNNING)


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "top", show_top, common, "live GPU and job utilisation (Ctrl-C stops)")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="refresh period")
    p.set_defaults(interrupt_ok=True)


async def show_top(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    interactive = not args.once and not out.json and out.stream.isatty()
    while True:
        statuses = sort_gpus(await client.gpus())
        if out.json:
            out.dump(frame_record(statuses), compact=not args.once)
        else:
            jobs = {j.id: j for j in await client.list(states=ACTIVE)}
            out.line((CLEAR if interactive else "") + render_frame(statuses, jobs))
        if args.once:
            return 0
        await asyncio.sleep(args.interval)


def render_frame(statuses: list[GpuStatus], jobs: dict[str, Job]) -> str:
    now = datetime.now().strftime("%H:%M:%S")
    busy = sum(1 for s in statuses if s.job_ids)
    head = f"hctl top  {now}  GPUs: {len(statuses)} ({busy} busy)  running jobs: {len(jobs)}"
    gpu_table = fmt.render_table(
        ("NODE", "IDX", "UUID", "MODEL", "UTIL", "MEMORY", "TEMP", "HEALTH", "JOBS"),
        [gpu_row(s) for s in statuses],
    )
    rows = []
    for s in statuses:
        for use in s.jobs:
            job = jobs.get(use.job_id)
            name = job.spec.name if job else ""
            pred = f"{job.predicted_slowdown:.2f}" if job else "-"
            age = fmt.age(job.started_at) if job else "-"
            rows.append(
                (
                    use.job_id,
                    name,
                    s.gpu.node,
                    s.gpu.index,
                    use.attempt,
                    fmt.pct(use.util_sm),
                    fmt.mib(use.mem_used_mib),
                    pred,
                    age,
                )
            )
    job_table = fmt.render_table(
        ("JOB", "NAME", "NODE", "GPU", "ATTEMPT", "UTIL", "MEMORY", "PRED SLOWDOWN", "UPTIME"), rows
    )
    return f"{head}\n\n{gpu_table}\n\n{job_table}"


def frame_record(statuses: list[GpuStatus]) -> dict[str, Any]:
    return {
        "at": time.time(),
        "gpus": [gpu_status_record(s) for s in statuses],
        "jobs": [job_gpu_stats_record(u) for s in statuses for u in s.jobs],
    }
