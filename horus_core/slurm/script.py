"""A pilot's batch script: ``#SBATCH`` lines for one node with K GPUs and a warning signal
before the walltime, then ``exec horus-worker --slurm`` (docs/slurm.md)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from horus_core.address import split_addresses

JOB_NAME = "horus-pilot"  # every pilot's Slurm job name: how horus-slurm finds its pilots
WARN_SIGNAL = "USR1"  # sent to the batch shell (the worker) warn_s before the walltime
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_PATH = re.compile(r"^[^\s'\"\\]{1,1024}$")
_UNLIMITED = ("unlimited", "infinite")


def parse_time(text: str) -> int | None:
    """A Slurm time limit (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``) in seconds;
    None for UNLIMITED. ValueError for anything else (sbatch would refuse it too)."""
    s = text.strip()
    if s.lower() in _UNLIMITED:
        return None
    m = _TIME.match(s)
    if m is None:
        raise ValueError(f"--time: expected minutes, M:S, H:M:S or D-H[:M[:S]], got {text!r}")
    days, a, b, c = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        h, mi, sec = int(a), int(b or 0), int(c or 0)
        return int(days) * 86400 + h * 3600 + mi * 60 + sec
    if c is not None:
        return int(a) * 3600 + int(b) * 60 + int(c)
    return int(a) * 60 + int(b or 0)


@dataclass(frozen=True, slots=True)
class PilotSpec:
    """What every pilot of one ``horus-slurm up`` asks Slurm for and runs."""

    master: str  # the master's worker endpoint(s), as horus-worker --master takes them
    gpus_per_node: int
    partition: str = ""
    time: str = ""  # Slurm's time limit; "" = the partition's default
    account: str = ""
    gpu_type: str = ""  # typed GRES (gpu:TYPE:K); "" = any
    warn_s: int = 300  # the warning signal comes this long before the walltime
    stop_s: int = 60  # what still runs this long before the walltime is preempted
    worker: tuple[str, ...] = ("horus-worker",)  # the worker's command line (an absolute path)
    worker_args: tuple[str, ...] = ()  # more horus-worker flags (e.g. --fake-gpus 4)
    output: str = ""  # sbatch --output ("" = Slurm's slurm-%j.out in the submit directory)
    extra: tuple[str, ...] = ()  # sbatch flags after "--", passed as they are

    def check(self) -> None:
        """ValueError naming the first bad field (nothing is submitted)."""
        split_addresses(self.master)  # (its own ValueError)
        if not 1 <= self.gpus_per_node <= 64:
            raise ValueError(f"--gpus-per-node must be 1 to 64, got {self.gpus_per_node}")
        for flag, value in (("--partition", self.partition), ("--account", self.account)):
            if value and not _NAME.match(value):
                raise ValueError(
                    f"{flag} must be a Slurm name (letters, digits, '.', '_', '-'), got {value!r}"
                )
        if self.output and not _PATH.match(self.output):
            raise ValueError(f"--output must be a path without blanks or quotes, got {self.output!r}")
        if self.time and any(c.isspace() for c in self.time):
            raise ValueError(f"--time: no blanks, got {self.time!r}")
        if self.gpu_type and not _NAME.match(self.gpu_type):
            raise ValueError(f"--gpu-type must be a GRES type name, got {self.gpu_type!r}")
        if not 0 <= self.stop_s < self.warn_s <= 65535:
            raise ValueError(
                f"expected 0 <= --stop-s < --warn-s <= 65535, got {self.stop_s} and {self.warn_s}"
            )
        limit = parse_time(self.time) if self.time else None
        if limit is not None and limit <= self.warn_s:
            raise ValueError(f"--time {self.time} is not longer than the warning (--warn-s {self.warn_s})")
        if not self.worker:
            raise ValueError("no worker command")


def render_script(spec: PilotSpec) -> str:
    """The batch script of one pilot (submitted on sbatch's stdin)."""
    gres = f"gpu:{spec.gpu_type}:{spec.gpus_per_node}" if spec.gpu_type else f"gpu:{spec.gpus_per_node}"
    lines = [
        "#!/bin/bash",
        "# A Horus pilot (horus-slurm up, docs/slurm.md): horus-worker on this job's GPUs.",
        f"#SBATCH --job-name={JOB_NAME}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --gres={gres}",
        f"#SBATCH --signal=B:{WARN_SIGNAL}@{spec.warn_s}",
    ]
    for flag, value in (
        ("time", spec.time),
        ("partition", spec.partition),
        ("account", spec.account),
        ("output", spec.output),
    ):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")  # (checked: no blanks or quotes)
    worker = [
        *spec.worker,
        "--slurm",
        "--master",
        spec.master,
        "--slurm-warn-s",
        str(spec.warn_s),
        "--slurm-stop-s",
        str(spec.stop_s),
    ]
    state = '--state-dir "${TMPDIR:-/tmp}/horus-pilot-${SLURM_JOB_ID}"'  # (node-local; the user's wins)
    more = "".join(f" {shlex.quote(w)}" for w in spec.worker_args)
    lines.append(f"exec {' '.join(shlex.quote(w) for w in worker)} {state}{more}")
    return "\n".join(lines) + "\n"


def sbatch_argv(spec: PilotSpec) -> list[str]:
    """sbatch's command line (the script goes on its stdin)."""
    return ["sbatch", "--parsable", *spec.extra]
