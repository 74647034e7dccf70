"""``horus-worker --slurm``: the worker as a Slurm pilot (docs/slurm.md).

It runs in the batch script of a ``horus-slurm up`` job: it is named after its Slurm job, keeps
to the GPUs Slurm gave the job (``$SLURM_JOB_GPUS``), tells the master its job id and end time,
and on the warning signal (``--signal=B:USR1@WARN``) asks the master to drain its node: no new
placements, and what still runs ``--slurm-stop-s`` before the walltime is preempted (a job
checkpoints in its grace) and re-queued elsewhere. The walltime's or scancel's SIGTERM then
stops what is left, reported as stopped, so the master re-queues it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from horus_core.model import SlurmTag
from horus_core.plane import GpuReading
from horus_core.slurm import env as slurm_env
from horus_core.slurm.squeue import parse_squeue
from worker.gpu.base import GpuInfo, GpuProbe, ProbeTarget, ProcessReading

log = logging.getLogger("horus.worker.slurm")
SQUEUE_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Pilot:
    job_id: str
    gpu_indices: tuple[int, ...]  # () = every GPU the probe sees
    warn_s: float
    stop_s: float

    @property
    def name(self) -> str:
        return slurm_env.pilot_name(self.job_id)


def pilot_from_env(env: Mapping[str, str], warn_s: float, stop_s: float) -> Pilot:
    """ValueError outside a Slurm job or with GPU variables that cannot be read."""
    return Pilot(slurm_env.job_id(env), slurm_env.job_gpus(env), warn_s, stop_s)


def end_time(job_id: str) -> float:
    """When Slurm ends the job (unix seconds; 0 when squeue does not say)."""
    try:
        out = subprocess.run(
            ["squeue", "--json", "--jobs", job_id],
            capture_output=True,
            text=True,
            timeout=SQUEUE_TIMEOUT_S,
            check=True,
        ).stdout
        jobs = [j for j in parse_squeue(out) if j.job_id == job_id]
    except (OSError, subprocess.SubprocessError, ValueError, json.JSONDecodeError) as exc:
        log.warning("cannot read the end time of Slurm job %s: %s", job_id, exc)
        return 0.0
    return jobs[0].end_time if jobs else 0.0


def drain_timeout(end: float, now: float, pilot: Pilot) -> float:
    """How long after the warning the node's remaining jobs are preempted: until ``stop_s``
    before the end (the end as squeue says it, or ``warn_s`` from now, whichever is sooner)."""
    left = pilot.warn_s if end <= 0 else min(max(0.0, end - now), pilot.warn_s)
    return max(0.0, left - pilot.stop_s)


def only(gpus: Sequence[GpuInfo], indices: Sequence[int]) -> list[GpuInfo]:
    """The GPUs with these indices; ValueError naming an index the probe does not see."""
    if not indices:
        return list(gpus)
    by_index = {g.index: g for g in gpus}
    missing = [i for i in indices if i not in by_index]
    if missing:
        seen = ",".join(str(g.index) for g in gpus) or "none"
        raise ValueError(f"Slurm gave GPU(s) {missing} but the probe sees indices {seen}")
    return [by_index[i] for i in indices]


class OnlyProbe:
    """A probe that keeps to the GPUs of the pilot's job (NVML sees every GPU of the host)."""

    def __init__(self, probe: GpuProbe, gpus: Sequence[GpuInfo]) -> None:
        self._probe, self._gpus = probe, list(gpus)
        self._uuids = {g.uuid for g in gpus}

    async def gpus(self) -> list[GpuInfo]:
        return list(self._gpus)

    async def read(self, running: Sequence[ProbeTarget]) -> tuple[list[GpuReading], list[ProcessReading]]:
        readings, procs = await self._probe.read(running)
        return [r for r in readings if r.uuid in self._uuids], [p for p in procs if p.gpu_uuid in self._uuids]

    async def memory(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        return [p for p in await self._probe.memory(running) if p.gpu_uuid in self._uuids]

    async def close(self) -> None:
        await self._probe.close()


class Drains(Protocol):
    def request_drain(self, timeout_s: float, reason: str, end_time: float = 0.0) -> None: ...


async def tag(pilot: Pilot) -> SlurmTag:
    """The pilot's Slurm tag, as the master shows it (``hctl nodes``)."""
    return SlurmTag(pilot.job_id, await asyncio.to_thread(end_time, pilot.job_id))


def on_warning(agent: Drains, pilot: Pilot) -> None:
    """Drain on Slurm's warning signal (the handler stays for later signals: each re-reads the end)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def warned() -> None:
        task = loop.create_task(_drain(agent, pilot, time.time()))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    loop.add_signal_handler(signal.SIGUSR1, warned)


async def _drain(agent: Drains, pilot: Pilot, warned_at: float) -> None:
    end = await asyncio.to_thread(end_time, pilot.job_id)
    timeout = drain_timeout(end, warned_at, pilot)
    log.warning(
        "Slurm job %s ends %s: draining, jobs still running in %.0f s are preempted and re-queued",
        pilot.job_id,
        f"in {end - warned_at:.0f} s" if end > 0 else "soon",
        timeout,
    )
    agent.request_drain(timeout, f"Slurm job {pilot.job_id} ends soon", end)
