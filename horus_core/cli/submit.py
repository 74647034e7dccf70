"""``hctl submit --gpus N [options] -- CMD [ARGS...]``: prints only the new job's id."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from horus_core.caps import parse_size
from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.cli.records import job_record
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument
from horus_core.gpurange import parse_gpus
from horus_core.model import NO_FLOOR, JobSpec, ProfileHints
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
    p.add_argument(
        "--workdir",
        default="",
        metavar="DIR",
        help="where the job runs (default: the current directory; in a container: the image's)",
    )
    add_local_env_flag(p)
    p.add_argument("--exclusive", action="store_true", help="never share its GPUs")
    p.add_argument("--priority", type=int, default=0)
    p.add_argument(
        "--min-speed",
        type=parse_min_speed,
        default=0.0,
        metavar="FRACTION",
        help="speed floor in [0, 1]: never share a GPU where this job would run below this fraction "
        "of its solo speed (0: the cluster default; none: no floor at all)",
    )
    p.add_argument(
        "--gpu-memory",
        type=parse_gpu_memory,
        default=0,
        metavar="SIZE",
        help="GPU memory cap per GPU while sharing, e.g. 12GiB or 4096MiB: the job is packed by it and "
        "stopped above it (default: its predicted or measured footprint; docs/sharing.md)",
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


def parse_min_speed(text: str) -> float:
    """A floor in [0, 1], or ``none`` (:data:`~horus_core.model.NO_FLOOR`)."""
    if text.strip().lower() == "none":
        return NO_FLOOR
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1] or 'none', got {text!r}") from None


def parse_gpu_memory(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        gpu_memory_mib=args.gpu_memory,
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
    return validate_spec(spec if args.no_local_env else local_context(spec))


def add_local_env_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-local-env",
        action="store_true",
        help="send neither the current directory nor PATH: a process job then runs in its attempt "
        "folder on the worker, with the worker's PATH (what the SDK does)",
    )


def local_context(spec: JobSpec) -> JobSpec:
    """A process job (no image) runs as submitted from here, as Slurm's ``sbatch`` does: in the
    current directory unless the spec names one, and with this PATH led by the directory of the
    Python that runs ``hctl``, so that the job's ``python`` is that interpreter (its venv), unless
    the spec sets PATH itself. A job in a container keeps its image's directory and PATH."""
    if spec.image:
        return spec
    try:
        workdir = spec.workdir or os.getcwd()
    except OSError:  # the current directory was removed: the worker's default
        workdir = spec.workdir
    env = spec.env
    if not any(key == "PATH" for key, _ in env):
        env = (*env, ("PATH", submitter_path()))
    return dataclasses.replace(spec, workdir=workdir, env=env)


def submitter_path() -> str:
    """This PATH with the directory of the running interpreter first (once)."""
    here = os.path.dirname(sys.executable)
    rest = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d and d != here]
    return os.pathsep.join([here, *rest] if here else rest)


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


def print_warnings(said: list[str]) -> None:
    for text in said:
        print(f"hctl: warning: {text}", file=sys.stderr)


async def submit_job(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    job, said = await client.submit_with_warnings(build_spec(args), request_id=args.request_id)
    print_warnings(said)
    if out.json:
        out.dump(job_record(job))
    else:
        out.line(job.id)
    return 0
