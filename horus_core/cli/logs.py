"""``hctl logs ID [--attempt N] [--node NAME] [-f]``: the output (stdout + stderr) of an attempt.
A multi-node gang's parts are merged line by line, each line prefixed with ``[node] ``."""

from __future__ import annotations

import argparse

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.client import HorusClient


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "logs", show_logs, common, "print a job's output (-f: keep following it)")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--attempt", type=int, default=0, metavar="N", help="which attempt (default: the latest)")
    p.add_argument("--node", default="", metavar="NAME", help="a multi-node job: only this node's output")
    p.add_argument("-f", "--follow", action="store_true", help="keep streaming until the attempt ends")
    p.set_defaults(interrupt_ok=True)


class NodePrefixer:
    """Whole lines of each node's output with a ``[node] `` prefix; a node's unfinished last line
    waits for the rest (chunks of several nodes interleave)."""

    def __init__(self) -> None:
        self._partial: dict[str, bytes] = {}

    def feed(self, node: str, data: bytes) -> bytes:
        if not node:
            return data
        *lines, rest = (self._partial.pop(node, b"") + data).split(b"\n")
        if rest:
            self._partial[node] = rest
        return b"".join(b"[%s] %s\n" % (node.encode(), line) for line in lines)

    def flush(self) -> bytes:
        out = b"".join(b"[%s] %s\n" % (n.encode(), rest) for n, rest in self._partial.items())
        self._partial.clear()
        return out


async def show_logs(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    prefix = NodePrefixer()
    chunks = client.log_chunks(args.job_id, attempt=args.attempt, follow=args.follow, node=args.node)
    async for chunk in chunks:
        if out.json:
            record = {
                "job_id": chunk.job_id,
                "attempt": chunk.attempt,
                "offset": chunk.offset,
                "data": chunk.data.decode("utf-8", errors="replace"),
                "node": chunk.node,
            }
            out.dump(record, compact=True)
        else:
            out.write_bytes(prefix.feed("" if args.node else chunk.node, chunk.data))
    if not out.json:
        out.write_bytes(prefix.flush())
    return 0
