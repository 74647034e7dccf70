"""``horus-slurm``: Horus workers as Slurm jobs (pilots) that join a master (docs/slurm.md).

horus-slurm up --master HOST:PORT --nodes N --gpus-per-node K [--partition P] [--time T]
               [--account A] [--warn-s 300] [--stop-s 60] [-- extra sbatch args]
horus-slurm up --master HOST:PORT --adaptive --min 0 --max M --gpus-per-node K ...
horus-slurm down [--all | JOBID ...]
horus-slurm status [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import pathlib
import shlex
import shutil
import signal
import sys
import time

from horus_core.client import HorusClient
from horus_core.slurm.env import pilot_name
from horus_core.slurm.script import PilotSpec
from horus_core.slurm.squeue import SlurmJob
from horus_core.slurmcli import commands
from horus_core.slurmcli.adaptive import Pool, PoolConfig

log = logging.getLogger("horus.slurm")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="horus-slurm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="submit pilots (horus-worker as Slurm jobs) that join the master")
    up.add_argument(
        "--master", default=os.environ.get("HORUS_MASTER", ""), help="the master (default $HORUS_MASTER)"
    )
    up.add_argument("--nodes", type=int, default=1, help="pilots to submit, one node each (default 1)")
    up.add_argument("--gpus-per-node", type=int, required=True, metavar="K", help="GPUs each pilot asks for")
    up.add_argument("--gpu-type", default="", help="typed GRES: gpu:TYPE:K (default any type)")
    up.add_argument("--partition", default="", help="Slurm partition (default: the cluster's default)")
    up.add_argument(
        "--time", default="", help="walltime, as sbatch --time takes it (default: the partition's)"
    )
    up.add_argument("--account", default="", help="Slurm account to charge")
    up.add_argument("--warn-s", type=int, default=300, help="the warning signal's lead before the walltime")
    up.add_argument(
        "--stop-s", type=int, default=60, help="what still runs this long before the end is re-queued"
    )
    up.add_argument(
        "--output", default="", help="sbatch --output of the pilots' logs (default slurm-%%j.out)"
    )
    up.add_argument("--worker", default="", help="the horus-worker to run (default: the one next to this)")
    up.add_argument("--worker-args", default="", help='more horus-worker flags, e.g. "--fake-gpus 4"')
    up.add_argument("--adaptive", action="store_true", help="keep a pool sized to the master's queue")
    up.add_argument("--min", type=int, default=0, help="--adaptive: fewest pilots (default 0)")
    up.add_argument("--max", type=int, default=0, help="--adaptive: most pilots (required with --adaptive)")
    up.add_argument(
        "--idle-grace", type=float, default=300.0, help="--adaptive: release pilots idle this long"
    )
    up.add_argument("--interval", type=float, default=10.0, help="--adaptive: seconds between rounds")
    up.add_argument("--token", default=os.environ.get("HORUS_TOKEN") or None, help="--adaptive: bearer token")
    down = sub.add_parser("down", help="cancel pilots (what runs on them is re-queued)")
    down.add_argument("job_ids", nargs="*", metavar="JOBID")
    down.add_argument("--all", action="store_true", help="every pilot of this user")
    status = sub.add_parser("status", help="the pilots as Slurm sees them")
    status.add_argument("--json", action="store_true")
    return p


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and the extra sbatch arguments after ``--``."""
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = _parser()
    args = p.parse_args(argv)
    if args.command == "down" and not args.all and not args.job_ids:
        p.error("down: name the pilots' job ids, or --all")
    if args.command == "down" and any(not j.isdigit() for j in args.job_ids):
        p.error("down: job ids are numbers")
    if args.command == "up":
        _check_up(p, args)
    if extra and args.command != "up":
        p.error("extra sbatch arguments go with up only")
    return args, extra


def _check_up(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.master.strip():
        p.error("up: --master HOST:PORT is required (or set $HORUS_MASTER)")
    if not 1 <= args.nodes <= 1000:
        p.error(f"up: --nodes must be 1 to 1000, got {args.nodes}")
    if args.adaptive and not (0 <= args.min <= args.max and args.max >= 1):
        p.error("up --adaptive: expected 0 <= --min <= --max and --max >= 1")
    if args.idle_grace < 0 or not 0.1 <= args.interval <= 3600:
        p.error("up: --idle-grace must not be negative and --interval within [0.1, 3600]")


def spec_of(args: argparse.Namespace, extra: list[str]) -> PilotSpec:
    try:
        worker_args = tuple(shlex.split(args.worker_args))
    except ValueError as exc:
        raise ValueError(f"--worker-args: {exc}") from None
    spec = PilotSpec(
        master=args.master.strip(),
        gpus_per_node=args.gpus_per_node,
        partition=args.partition,
        time=args.time,
        account=args.account,
        gpu_type=args.gpu_type,
        warn_s=args.warn_s,
        stop_s=args.stop_s,
        worker=(args.worker or default_worker(),),
        worker_args=worker_args,
        output=args.output,
        extra=tuple(extra),
    )
    spec.check()
    return spec


def default_worker() -> str:
    """The horus-worker of this installation (a pilot must run the same version)."""
    here = pathlib.Path(sys.executable).parent / "horus-worker"
    found = str(here) if here.exists() else shutil.which("horus-worker")
    if found is None:
        raise ValueError("horus-worker not found next to horus-slurm nor on PATH: give --worker PATH")
    return str(pathlib.Path(found).absolute())


async def up(args: argparse.Namespace, spec: PilotSpec) -> int:
    if args.adaptive:
        return await adaptive(args, spec)
    ids = []
    for _ in range(args.nodes):
        ids.append(await commands.submit(spec))
        print(f"submitted pilot {ids[-1]} (node {pilot_name(ids[-1])})", flush=True)
    return 0


async def adaptive(args: argparse.Namespace, spec: PilotSpec) -> int:
    config = PoolConfig(spec, args.min, args.max, args.idle_grace, args.interval)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with HorusClient.connect(spec.master, token=args.token) as client:
        print(
            f"adaptive pool of {args.min} to {args.max} pilot(s) for {spec.master}; Ctrl-C stops", flush=True
        )
        await Pool(config, client).run(stop)
    return 0


async def down(args: argparse.Namespace) -> int:
    ids = list(args.job_ids)
    if args.all:
        ids = [j.job_id for j in await commands.pilots() if j.active]
    else:
        known = {j.job_id for j in await commands.pilots()}
        strangers = [j for j in ids if j not in known]
        if strangers:
            raise commands.SlurmError(f"not pilots of yours: {', '.join(strangers)} (see horus-slurm status)")
    await commands.cancel(ids)
    print(f"cancelled {len(ids)} pilot(s){': ' + ', '.join(ids) if ids else ''}")
    return 0


async def status(args: argparse.Namespace) -> int:
    jobs, now = await commands.pilots(), time.time()
    if args.json:
        print(json.dumps([_record(j, now) for j in jobs], indent=2))
        return 0
    rows = [("JOBID", "NODE NAME", "STATE", "SLURM NODE", "TIME LEFT", "REASON")]
    rows += [(j.job_id, pilot_name(j.job_id), j.state, j.nodes or "-", _left(j, now), j.reason) for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _record(j: SlurmJob, now: float) -> dict[str, object]:
    return {
        "job_id": j.job_id,
        "node_name": pilot_name(j.job_id),
        "state": j.state,
        "nodes": j.nodes,
        "end_time": j.end_time,
        "left_s": j.left_s(now),
        "reason": j.reason,
    }


def _left(j: SlurmJob, now: float) -> str:
    left = j.left_s(now)
    if left is None:
        return "-"
    s = int(left)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


async def _main(args: argparse.Namespace, extra: list[str]) -> int:
    if args.command == "up":
        spec = spec_of(args, extra)  # (bad arguments before any Slurm command)
        commands.check_installed()
        return await up(args, spec)
    commands.check_installed()
    return await (down(args) if args.command == "down" else status(args))


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_main(args, extra))
    except ValueError as exc:
        print(f"horus-slurm: error: {exc}", file=sys.stderr)
        return 2
    except commands.SlurmError as exc:
        print(f"horus-slurm: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
