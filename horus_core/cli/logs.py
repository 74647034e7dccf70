"""``hctl logs ID [--attempt N] [-f]``: the output (stdout + stderr) of an attempt."""

from __future__ import annotations

import argparse

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.client import HorusClient


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "logs", show_logs, common, "print a job's output (-f: keep following it)")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--attempt", type=int, default=0, metavar="N", help="which attempt (default: the latest)")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming until the attempt ends")
    p.set_defaults(interrupt_ok=True)


async def show_logs(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    async for chunk in client.log_chunks(args.job_id, attempt=args.attempt, follow=args.follow):
        if out.json:
            record = {
                "job_id": chunk.job_id,
                "attempt": chunk.attempt,
                "offset": chunk.offset,
                "data": chunk.data.decode("utf-8", errors="replace"),
            }
            out.dump(record, compact=True)
        else:
            out.write_bytes(chunk.data)
    return 0
