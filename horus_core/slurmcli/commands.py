"""Slurm driven through its own commands: ``sbatch --parsable``, ``squeue --json``, ``scancel``.
A command that fails raises :class:`SlurmError` with what it printed on stderr."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence

from horus_core.slurm.script import JOB_NAME, PilotSpec, render_script, sbatch_argv
from horus_core.slurm.squeue import SlurmJob, parse_squeue

TIMEOUT_S = 60.0  # one Slurm command (slurmctld answers in well under a second when it is up)


class SlurmError(Exception):
    """A Slurm command is missing or failed; the message is one line for the user."""


def check_installed() -> None:
    missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
    if missing:
        raise SlurmError(
            f"Slurm's {', '.join(missing)} not found on PATH: run horus-slurm where you submit Slurm jobs "
            "(a login node), or install Slurm's client commands"
        )


async def run(argv: Sequence[str], stdin: str | None = None) -> str:
    """stdout of a Slurm command; SlurmError with its stderr when it fails or hangs."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc}") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise SlurmError(f"{argv[0]} did not answer in {TIMEOUT_S:g} s (is slurmctld up?)") from None
    if proc.returncode != 0:
        text = " ".join(err.decode(errors="replace").split()) or f"exit code {proc.returncode}"
        raise SlurmError(f"{argv[0]} failed: {text[:1000]}")
    return out.decode(errors="replace")


async def submit(spec: PilotSpec) -> str:
    """One pilot; its Slurm job id (``sbatch --parsable`` prints ``ID[;CLUSTER]``)."""
    out = (await run(sbatch_argv(spec), render_script(spec))).strip()
    job_id = out.split(";")[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {out[:200]!r}")
    return job_id


async def pilots(all_users: bool = False) -> list[SlurmJob]:
    """The pilots Slurm knows (this user's, unless ``all_users``)."""
    argv = ["squeue", "--json", "--name", JOB_NAME]
    if not all_users:
        argv += ["--user", str(os.getuid())]
    try:
        return [j for j in parse_squeue(await run(argv)) if j.name == JOB_NAME]
    except ValueError as exc:
        raise SlurmError(str(exc)) from None


async def cancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        await run(["scancel", *job_ids])
