"""``hctl cordon``, ``hctl drain`` and ``hctl uncordon``: nodes and GPUs out of service (admins)."""

from __future__ import annotations

import argparse
import math
import time

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.cli.records import node_record
from horus_core.client import HorusClient
from horus_core.model import Node, NodeState


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "cordon", cordon, common, "no new placements on a node; its jobs keep running")
    p.add_argument("node", metavar="NODE")
    p = add_command(
        sub, "drain", drain, common, "cordon a node, then preempt and re-queue what still runs there"
    )
    p.add_argument("node", metavar="NODE")
    p.add_argument(
        "--timeout",
        type=_seconds,
        metavar="S",
        help="seconds the running jobs get to finish before they are preempted (default: at once)",
    )
    p = add_command(
        sub, "uncordon", uncordon, common, "put a node back in service and release its quarantined GPUs"
    )
    p.add_argument("node", metavar="NODE")
    p.add_argument("--gpu", metavar="UUID", default="", help="release only this GPU's quarantine")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


async def cordon(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    return _show(await client.cordon(args.node), out)


async def drain(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    return _show(await client.drain(args.node, args.timeout), out)


async def uncordon(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    return _show(await client.uncordon(args.node, args.gpu), out)


def _show(node: Node, out: Output) -> int:
    if out.json:
        out.dump(node_record(node))
    else:
        held = quarantine_text(node)
        out.line(f"node {node.name}: {state_text(node)}" + ("" if held == "-" else f"; quarantined: {held}"))
    return 0


def state_text(node: Node, now: float | None = None) -> str:
    """The node's state, with the time left before a drain preempts what runs there."""
    if node.state is NodeState.DRAINING and node.drain_deadline is not None:
        left = node.drain_deadline - (time.time() if now is None else now)
        return f"DRAINING (preempts in {left:.0f}s)" if left > 0 else "DRAINING (preempting)"
    return node.state.value


def quarantine_text(node: Node) -> str:
    """``GPU 0: Xid 79``: the quarantined GPUs by index, with why; "-" when none."""
    held = sorted((g for g in node.gpus if g.quarantine), key=lambda g: g.index)
    return "; ".join(f"GPU {g.index}: {g.quarantine}" for g in held) or "-"
