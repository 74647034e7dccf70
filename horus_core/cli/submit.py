"""``hctl submit --gpus N [options] -- CMD [ARGS...]``: prints only the new job's id."""

from __future__ import annotations

import argparse
from pathlib import Path

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.cli.records import job_record
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument
from horus_core.gpurange import parse_gpus
from horus_core.model import JobSpec, ProfileHints
from horus_core.modelcard import ModelCard, parse_card
from horus_core.validation import validate_spec


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "submit", submit_job, common, "submit a job; prints its id")
    p.usage = "hctl submit --gpus N|MIN:MAX [--gpus-per-node K] [--nodes M] [options] -- CMD [ARGS...]"
    p.add_argument(
        "--gpus",
        metavar="N|MIN:MAX",
        help="number of GPUs, on one node or several (may be left out when both --gpus-per-node and "
        "--nodes are given), or an elastic range MIN:MAX: the job starts on MIN and the policy "
        "(optimus) may resize it within the range; it reads its count from $WORLD_SIZE / $HORUS_GPUS "
        "at every start",
    )
    p.add_argument(
        "--gpus-per-node", type=int, default=0, metavar="K", help="GPUs on each node (default: any shape)"
    )
    p.add_argument("--nodes", type=int, default=0, metavar="M", help="number of nodes (default: any shape)")
    p.add_argument("--name", default="")
    p.add_argument(
        "--type",
        dest="job_type",
        default="",
        metavar="JOB_TYPE",
        help='workload signature, e.g. "ResNet-18 (batch size 32)"',
    )
    p.add_argument("--image", default="", help="run in this Docker image (default: a plain process)")
    p.add_argument(
        "--env", action="extend", nargs="+", default=[], metavar="K=V", help="environment (repeatable)"
    )
    p.add_argument("--workdir", default="")
    p.add_argument("--exclusive", action="store_true", help="never share its GPUs")
    p.add_argument("--priority", type=int, default=0)
    p.add_argument(
        "--min-speed",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="speed floor in [0, 1]: never share a GPU where this job would run below this fraction "
        "of its solo speed (0: the cluster default)",
    )
    p.add_argument(
        "--gpu-type",
        dest="gpu_types",
        default="",
        metavar="TYPES",
        help="GPU types the job accepts, comma-separated, e.g. v100,a100 (default: any)",
    )
    p.add_argument(
        "--total-steps",
        type=int,
        default=0,
        metavar="N",
        help="the steps the job trains for, if known (progress estimates and optimus use it; 0: unknown)",
    )
    p.add_argument("--queue", default="", help="queue to run in (default: your default queue)")
    p.add_argument(
        "--priority-class", default="", metavar="CLASS", help="priority class (default: the default class)"
    )
    p.add_argument(
        "--grace-s",
        type=float,
        default=0.0,
        metavar="S",
        help="SIGTERM -> SIGKILL grace when stopped (0: 30 s)",
    )
    p.add_argument("--util-avg", type=float, metavar="PCT", help="expected average GPU utilisation, %%")
    p.add_argument("--util-peak", type=float, metavar="PCT", help="expected peak GPU utilisation, %%")
    p.add_argument("--mem-mib", type=int, metavar="MIB", help="expected GPU memory use")
    p.add_argument(
        "--model-card",
        type=Path,
        metavar="FILE",
        help="the job's model card (hctl describe ... -o FILE): its GPU use is predicted from it",
    )
    p.add_argument("--cpus", type=float, default=0.0, help="container CPU limit (0: none)")
    p.add_argument("--memory-mib", type=int, default=0, help="container memory limit (0: none)")
    p.add_argument("--mount", dest="mounts", action="append", default=[], metavar="HOST:CONTAINER[:ro]")
    p.add_argument("--request-id", default=None, help="idempotency key (default: a fresh uuid)")
    p.add_argument("argv", nargs="*", metavar="CMD", help=argparse.SUPPRESS)


def build_spec(args: argparse.Namespace) -> JobSpec:
    """The spec the arguments describe, validated here first so mistakes fail fast (exit 2)."""
    command: list[str] = list(args.command_argv)
    if args.argv and command:
        raise InvalidArgument("command", f"unexpected arguments before '--': {' '.join(args.argv)}")
    command = command or list(args.argv)
    if not command:
        raise InvalidArgument(
            "command", "missing; give it after '--', e.g. hctl submit --gpus 1 -- python train.py"
        )
    gpus, gpus_min, gpus_max = parse_gpus(str(total_gpus(args)) if args.gpus is None else str(args.gpus))
    spec = JobSpec(
        command=tuple(command),
        gpus=gpus,
        name=args.name,
        job_type=args.job_type,
        image=args.image,
        env=tuple(parse_env(item) for item in args.env),
        workdir=args.workdir,
        exclusive=args.exclusive,
        priority=args.priority,
        hints=ProfileHints(util_avg=args.util_avg, util_peak=args.util_peak, mem_mib=args.mem_mib),
        cpus=args.cpus,
        memory_mib=args.memory_mib,
        mounts=tuple(args.mounts),
        min_speed=args.min_speed,
        gpu_types=parse_gpu_types(args.gpu_types),
        gpus_min=gpus_min,
        gpus_max=gpus_max,
        total_steps=args.total_steps,
        queue=args.queue,
        priority_class=args.priority_class,
        grace_s=args.grace_s,
        gpus_per_node=args.gpus_per_node,
        nodes=args.nodes,
        model_card=None if args.model_card is None else read_card(args.model_card),
    )
    return validate_spec(spec)


def read_card(path: Path) -> ModelCard:
    """A card file (``hctl describe -o FILE``), checked: a bad one names its field."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument("model_card", f"cannot read {path}: {exc}") from None
    return parse_card(text)


def total_gpus(args: argparse.Namespace) -> int:
    """``--gpus``, or ``--gpus-per-node`` x ``--nodes`` when it is left out."""
    if args.gpus is not None:
        return int(args.gpus) if str(args.gpus).isdigit() else 0
    if args.gpus_per_node > 0 and args.nodes > 0:
        return int(args.gpus_per_node * args.nodes)
    raise InvalidArgument("gpus", "missing: give --gpus N (or both --gpus-per-node K and --nodes M)")


def parse_gpu_types(text: str) -> tuple[str, ...]:
    """``"V100, a100"`` -> ``("v100", "a100")``; empty: any type."""
    return tuple(t.strip().lower() for t in text.split(",") if t.strip())


def parse_env(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InvalidArgument("env", f"expected KEY=VALUE, got {item!r}")
    return key, value


async def submit_job(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    job = await client.submit(build_spec(args), request_id=args.request_id)
    if out.json:
        out.dump(job_record(job))
    else:
        out.line(job.id)
    return 0
