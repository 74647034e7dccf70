"""``hctl queues``: per queue its quota, GPUs in use and borrowed, and pending jobs."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.client import HorusClient
from horus_core.model import gpu_type_of
from horus_core.queueusage import QueueUsage, quota_warnings


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    add_command(sub, "queues", list_queues, common, "queues: quota, usage, borrowed GPUs, pending jobs")


async def list_queues(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    rows = await client.queues()
    if out.json:
        out.dump([queue_record(r) for r in rows])
        return 0
    if not rows:
        out.line("no queues configured (the master runs without --queues): one queue for everyone")
        return 0
    gpus: dict[str, int] = {}
    for node in await client.nodes():
        for g in node.gpus:
            kind = g.gpu_type or gpu_type_of(g.model)
            gpus[kind] = gpus.get(kind, 0) + 1
    for text in quota_warnings(rows, gpus) if gpus else []:
        print(f"hctl: warning: {text}: reclaim cannot give every queue its quota", file=sys.stderr)
    out.table(
        ("QUEUE", "QUOTA", "BORROW LIMIT", "USED", "BORROWED", "RUNNING", "PENDING (GPUS)"),
        [
            (
                r.name,
                quota_text(r),
                r.borrowing_limit,
                r.used,
                r.borrowed,
                r.running,
                f"{r.pending} ({r.pending_gpus})",
            )
            for r in rows
        ],
    )
    return 0


def quota_text(row: QueueUsage) -> str:
    """``8 (v100:4, *:4)``: the total, then per type where a type is named."""
    parts = ", ".join(f"{t}:{n}" for t, n in sorted(row.nominal.items()))
    return f"{row.nominal_total} ({parts})" if parts else "0"


def queue_record(row: QueueUsage) -> dict[str, object]:
    record = dataclasses.asdict(row)
    record["nominal"] = dict(row.nominal)
    record["nominal_total"] = row.nominal_total
    return record
