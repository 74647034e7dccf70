"""Horus on Slurm, the pure parts (docs/slurm.md): what a pilot's batch script says, what
``squeue --json`` says about the pilots, which GPUs a pilot was given, and how many pilots the
adaptive pool wants. No I/O here: the commands run in :mod:`horus_core.slurmcli` and the pilot's
own side in ``worker/slurm.py``."""

from horus_core.slurm.env import job_gpus, pilot_name
from horus_core.slurm.script import PilotSpec, parse_time, render_script, sbatch_argv
from horus_core.slurm.sizing import PoolPilot, Sizing, decide, wanted_gpus
from horus_core.slurm.squeue import SlurmJob, parse_squeue

__all__ = [
    "PilotSpec",
    "PoolPilot",
    "Sizing",
    "SlurmJob",
    "decide",
    "job_gpus",
    "parse_squeue",
    "parse_time",
    "pilot_name",
    "render_script",
    "sbatch_argv",
    "wanted_gpus",
]
