"""``hctl watch [ID]`` and ``hctl wait ID``."""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from datetime import datetime

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.cli.records import event_record, job_record
from horus_core.client import HorusClient, JobEvent
from horus_core.model import JobState

EXIT_TIMEOUT = 124  # `hctl wait --timeout` ran out (as timeout(1) exits): not a failure of the job


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "watch", watch_jobs, common, "print job state changes as they happen (Ctrl-C stops)")
    p.add_argument("job_id", nargs="?", metavar="ID", help="only this job (and stop once it has finished)")
    p.set_defaults(interrupt_ok=True)

    p = add_command(
        sub, "wait", wait_job, common,
        "wait until a job finishes; exit 0 if it SUCCEEDED, 1 if not, 124 if --timeout ran out first",
    )  # fmt: skip
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="give up after this long")


async def watch_jobs(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    async with aclosing(client.watch(args.job_id)) as events:
        if args.job_id:
            job = await client.get(args.job_id)  # unknown id: NotFound; finished: nothing to watch
            if job.state.terminal:
                print(f"hctl: job {job.id} has already finished: {job.state.value}", file=sys.stderr)
                return 0
        async for event in events:
            if out.json:
                out.dump(event_record(event), compact=True)
            else:
                out.line(event_line(event))
            if args.job_id and event.job.id == args.job_id and event.job.state.terminal:
                break
    return 0


def event_line(event: JobEvent) -> str:
    at = datetime.fromtimestamp(event.at).strftime("%H:%M:%S") if event.at else "--:--:--"
    previous = event.previous_state.value if event.previous_state else "NEW"
    job = event.job
    where = f" on {job.node}" if job.node and job.state.active else ""
    reason = f"  {event.reason or job.reason}" if (event.reason or job.reason) else ""
    return f"{at}  {job.id}  {previous} -> {job.state.value}{where}{reason}"


async def wait_job(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    try:
        job = await client.wait(args.job_id, timeout=args.timeout)
    except TimeoutError:
        print(f"hctl: error: job {args.job_id} did not finish within {args.timeout:g} s", file=sys.stderr)
        return EXIT_TIMEOUT
    if out.json:
        out.dump(job_record(job))
    else:
        code = f" (exit code {job.exit_code})" if job.exit_code is not None else ""
        reason = f": {job.reason}" if job.reason and job.state is not JobState.SUCCEEDED else ""
        out.line(f"{job.id} {job.state.value}{code}{reason}")
    return 0 if job.state is JobState.SUCCEEDED else 1
