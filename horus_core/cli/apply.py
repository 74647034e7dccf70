"""``hctl apply -f job.yaml`` (submit a job file) and ``hctl get job ID [-o yaml]`` (print one back)."""

from __future__ import annotations

import argparse
import sys

from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import YAML, Output
from horus_core.cli.records import job_record
from horus_core.cli.submit import add_local_env_flag, local_context, print_warnings
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument
from horus_core.gpurange import gpus_text
from horus_core.validation import validate_spec

MAX_FILE_BYTES = 1 << 20


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, "apply", apply_file, common, "submit the job a YAML file describes; prints its id")
    p.add_argument("-f", "--filename", required=True, metavar="FILE", help="the job file ('-': stdin)")
    p.add_argument("--request-id", default=None, help="idempotency key (default: a fresh uuid)")
    add_local_env_flag(p)

    p = add_command(sub, "get", get_object, common, "print one object (get job ID -o yaml: its job file)")
    p.add_argument("kind", choices=("job",), help="what to print")
    p.add_argument("job_id", metavar="ID")


def read_job_file(name: str) -> str:
    """The file's text; a missing or unreadable file is bad input (exit 2)."""
    try:
        if name == "-":
            text = sys.stdin.read(MAX_FILE_BYTES + 1)
        else:
            with open(name, encoding="utf-8") as f:
                text = f.read(MAX_FILE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument("-f", f"cannot read {name}: {exc}") from None
    if len(text) > MAX_FILE_BYTES:
        raise InvalidArgument("-f", f"{name} is larger than {MAX_FILE_BYTES} bytes")
    return text


async def apply_file(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    from horus_core import jobfile  # (PyYAML: loaded only by the commands that read or write YAML)

    parsed = jobfile.load(read_job_file(args.filename))  # before any call: mistakes fail fast
    for warning in parsed.warnings:
        print(f"hctl: warning: {warning}", file=sys.stderr)
    spec = parsed.spec if args.no_local_env else validate_spec(local_context(parsed.spec))
    job, said = await client.submit_with_warnings(spec, request_id=args.request_id)
    print_warnings(said)
    if out.json:
        out.dump(job_record(job))
    else:
        out.line(job.id)
    return 0


async def get_object(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    job = await client.get(args.job_id)
    if out.fmt == YAML:
        from horus_core import jobfile

        out.stream.write(jobfile.dump(job.spec))
        out.stream.flush()
    elif out.json:
        out.dump(job_record(job))
    else:
        row = (job.id, job.spec.name, job.state.value, gpus_text(job), job.node)
        out.table(("ID", "NAME", "STATE", "GPUS", "NODE"), [row])
    return 0
