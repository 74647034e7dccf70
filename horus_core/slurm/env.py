"""What a pilot reads from the environment Slurm gives its batch script."""

from __future__ import annotations

import re
from collections.abc import Mapping

_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")  # a job, or an array task "123_4"
_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


def job_id(env: Mapping[str, str]) -> str:
    """``$SLURM_JOB_ID``; ValueError outside a Slurm job."""
    value = env.get("SLURM_JOB_ID", "").strip()
    if not _JOB_ID.match(value):
        raise ValueError("not inside a Slurm job: $SLURM_JOB_ID is not set (run it through sbatch)")
    return value


def pilot_name(slurm_job_id: str) -> str:
    """The node name of the pilot that runs in a Slurm job."""
    return f"slurm-{slurm_job_id}"


def job_gpus(env: Mapping[str, str]) -> tuple[int, ...]:
    """The GPU indices (as the node numbers them) Slurm gave the job: ``$SLURM_JOB_GPUS``, else
    a numeric ``$CUDA_VISIBLE_DEVICES``; () when neither says (a job without GPUs)."""
    for key in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"):
        value = env.get(key, "").strip()
        if value:
            try:
                return parse_indices(value)
            except ValueError:
                if key != "CUDA_VISIBLE_DEVICES":  # (UUIDs there say nothing about indices)
                    raise ValueError(f"${key}: expected GPU indices like 0,2-3, got {value[:80]!r}") from None
    return ()


def parse_indices(text: str) -> tuple[int, ...]:
    """``"0,2-3"`` -> (0, 2, 3); ValueError for anything else."""
    out: list[int] = []
    for part in text.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise ValueError(f"not a GPU index or range: {part!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo or hi - lo > 1024:
            raise ValueError(f"not a GPU index range: {part!r}")
        out += range(lo, hi + 1)
    if len(set(out)) != len(out):
        raise ValueError(f"a GPU index appears twice in {text!r}")
    return tuple(out)
