"""Simulated GPUs: a laptop demo that looks like a real cluster.

Each simulated GPU's utilisation and memory follow the profiles of the attempts placed on it (the
interference model's ``profile(spec)``; summed utilisation capped at 100 %), every attempt's main
process shows up in the per-process readings, and each attempt gets a normalised speed from its
co-runners (``co_speeds``, the minimum over its GPUs) that the worker hands to the job through
``$HORUS_SPEED_FILE``, so a badly paired job really runs slower. Ground-truth pair speeds
(:mod:`worker.gpu.ground_truth`, ``--sim-interference``) replace the model's where given.

An attempt's GPU memory is what its stand-in workload says it uses (``$HORUS_SIM_GPU_MEMORY_FILE``,
:mod:`horus_core.simgpu`; it may grow), else its profile's footprint, held to its declared cap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from horus_core.interference import default_model
from horus_core.model import JobSpec, gpu_type_of
from worker.gpu.base import GpuInfo, GpuReading, InterferenceLike, ProbeTarget, ProcessReading, Profile
from worker.gpu.faults import FaultFile
from worker.gpu.ground_truth import GroundTruthModel, PairTruth


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str  # as NVML would report it
    memory_mib: int
    tdp_w: float


CATALOG: dict[str, GpuModel] = {
    "v100": GpuModel("Tesla V100-SXM2-16GB", 16384, 300.0),
    "p100": GpuModel("Tesla P100-PCIE-16GB", 16384, 250.0),
    "k80": GpuModel("Tesla K80", 11441, 150.0),
    "t4": GpuModel("Tesla T4", 15360, 70.0),
    "a100": GpuModel("NVIDIA A100-SXM4-80GB", 81920, 400.0),
    "h100": GpuModel("NVIDIA H100 80GB HBM3", 81559, 700.0),
}
DEFAULT_MODEL = "v100"


def parse_fake_gpus(text: str) -> list[GpuModel]:
    """``"4"`` (V100s), ``"4xV100"``, ``"2xK80,2xV100"`` → one GpuModel per GPU."""
    out: list[GpuModel] = []
    for part in text.lower().replace(" ", "").split(","):
        count_s, _, model = part.partition("x")
        model = model or DEFAULT_MODEL
        if not count_s.isdigit() or int(count_s) < 1 or model not in CATALOG:
            known = ", ".join(k.upper() for k in CATALOG)
            raise ValueError(f"--fake-gpus: expected N or NxMODEL (MODEL one of {known}), got {part!r}")
        out += [CATALOG[model]] * int(count_s)
    if len(out) > 64:
        raise ValueError(f"--fake-gpus: at most 64 simulated GPUs per worker, got {len(out)}")
    return out


def simulated_uuid(worker_name: str, index: int) -> str:
    """Stable per worker name and index, shaped like an NVML UUID, so a restarted worker keeps its GPUs."""
    digest = hashlib.sha256(f"horus-sim/{worker_name}/{index}".encode()).digest()
    return f"GPU-{uuid.UUID(bytes=digest[:16], version=4)}"


def simulated_gpus(worker_name: str, models: Sequence[GpuModel]) -> list[GpuInfo]:
    return [
        GpuInfo(uuid=simulated_uuid(worker_name, i), index=i, model=m.name, memory_mib=m.memory_mib)
        for i, m in enumerate(models)
    ]


# ------------------------------------------------------------------------ interference model


@dataclass(frozen=True, slots=True)
class _FallbackProfile:
    util_avg: float
    util_peak: float
    mem_mib: int


class FallbackModel:
    """A simple stand-in model for tests: hints or 50 % / 2 GiB, and a slowdown from summed
    utilisation (none up to 100 %, proportional above). A signature is the job type (or the
    command); its utilisation is the one of the last spec seen with it."""

    def __init__(self) -> None:
        self._util: dict[str, float] = {}

    def enter(self, spec: JobSpec) -> None:
        return None  # (it keeps nothing of a job but what signature() records)

    def profile(self, spec: JobSpec) -> Profile:
        h = spec.hints
        avg = h.util_avg if h.util_avg is not None else 50.0
        peak = h.util_peak if h.util_peak is not None else max(avg, min(100.0, avg * 1.2))
        return _FallbackProfile(avg, peak, h.mem_mib if h.mem_mib is not None else 2048)

    def signature(self, spec: JobSpec) -> str:
        name = spec.job_type or (spec.command[0] if spec.command else "")
        self._util[name] = self.profile(spec).util_avg
        return name

    def co_speeds(self, signatures: Sequence[str], gpu_type: str) -> tuple[float, ...]:
        total = sum(self._util.get(s, 50.0) for s in signatures)
        speed = 1.0 if total <= 100.0 else 100.0 / total
        return tuple(speed for _ in signatures)


# --------------------------------------------------------------------------------- the probe


class SimulatedProbe:
    """A GpuProbe over simulated GPUs; ``noise`` (0..1) moves utilisation between avg and peak."""

    def __init__(
        self,
        gpus: Sequence[GpuInfo],
        model: InterferenceLike | None = None,
        *,
        noise: float = 0.5,
        seed: int | None = None,
        ground_truth: Sequence[PairTruth] = (),
        faults: FaultFile | None = None,
    ) -> None:
        self._gpus = list(gpus)
        self._tdp = {g.uuid: _tdp_of(g.model) for g in self._gpus}
        self._truth = list(ground_truth)
        self._model = self._with_truth(model) if model is not None else None
        self._noise = noise
        self._rng = random.Random(seed)
        self._speeds: dict[tuple[str, int], float] = {}
        self._faults = faults  # injected Xid / ECC errors (--fake-gpu-faults)

    async def gpus(self) -> list[GpuInfo]:
        return list(self._gpus)

    async def read(self, running: Sequence[ProbeTarget]) -> tuple[list[GpuReading], list[ProcessReading]]:
        gpus, procs, speeds = await asyncio.to_thread(self.read_now, running)
        self._speeds = speeds
        return gpus, procs

    def speed_of(self, job_id: str, attempt: int) -> float:
        """The attempt's normalised speed at the last reading (1.0 if it was not running then)."""
        return self._speeds.get((job_id, attempt), 1.0)

    async def memory(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        return await asyncio.to_thread(self.memory_now, running)

    def memory_now(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        """Each attempt's main process on each of its GPUs, with its memory (:meth:`_memory`)."""
        model = self._model_now()
        out = []
        for t in running:
            if t.pids:
                model.enter(t.spec)
                mem = self._memory(t, model.profile(t.spec))
                out += [ProcessReading(t.pids[0], uuid, mem) for uuid in t.gpu_uuids]
        return out

    def _model_now(self) -> InterferenceLike:
        if self._model is None:
            self._model = self._with_truth(default_model())
        return self._model

    @staticmethod
    def _memory(t: ProbeTarget, profile: Profile) -> int:
        """What the workload wrote to its memory file, else the profile's footprint (at most its
        declared cap: a simulated job keeps to its cap unless its workload says otherwise)."""
        if t.memory_file:
            try:
                with open(t.memory_file, encoding="ascii") as fh:
                    return max(0, int(fh.read().strip()))
            except (OSError, ValueError):
                pass
        cap = t.spec.gpu_memory_mib
        return min(profile.mem_mib, cap) if cap > 0 else profile.mem_mib

    async def close(self) -> None:
        return None

    def read_now(
        self, running: Sequence[ProbeTarget]
    ) -> tuple[list[GpuReading], list[ProcessReading], dict[tuple[str, int], float]]:
        """The synchronous computation behind :meth:`read` (runs in a thread)."""
        model = self._model_now()
        for t in running:
            model.enter(t.spec)  # (its card and hints, before the co-location speeds read them)
        profiles = {(t.job_id, t.attempt): model.profile(t.spec) for t in running}
        mems = {(t.job_id, t.attempt): self._memory(t, profiles[(t.job_id, t.attempt)]) for t in running}
        speeds = {key: 1.0 for key in profiles}
        readings: list[GpuReading] = []
        procs: list[ProcessReading] = []
        faults = self._faults.take() if self._faults is not None else {}
        for gpu in self._gpus:
            here = [t for t in running if gpu.uuid in t.gpu_uuids]
            utils = [self._util(profiles[(t.job_id, t.attempt)]) for t in here]
            scale = min(1.0, 100.0 / sum(utils)) if sum(utils) > 0 else 1.0
            mem = min(gpu.memory_mib, sum(mems[(t.job_id, t.attempt)] for t in here))
            if here:
                co = model.co_speeds([model.signature(t.spec) for t in here], gpu_type_of(gpu.model))
                for t, s in zip(here, co, strict=True):
                    speeds[(t.job_id, t.attempt)] = min(speeds[(t.job_id, t.attempt)], s)
            for t, util in zip(here, utils, strict=True):
                if t.pids:
                    mem_t = mems[(t.job_id, t.attempt)]
                    procs.append(ProcessReading(t.pids[0], gpu.uuid, mem_t, round(util * scale, 1)))
            reading = self._reading(gpu, min(100.0, sum(utils)), mem)
            fault = faults.get(gpu.index)
            if fault is not None:
                reading = dataclasses.replace(
                    reading, ecc_errors=fault.ecc_errors, xid_events=fault.xid_events
                )
            readings.append(reading)
        return readings, procs, speeds

    def _with_truth(self, model: InterferenceLike) -> InterferenceLike:
        """The model, overridden by the ground-truth pairs of ``--sim-interference`` if any."""
        return GroundTruthModel(model, self._truth) if self._truth else model

    def _util(self, profile: Profile) -> float:
        jitter = self._rng.random() * self._noise if self._noise > 0 else 0.0
        return max(0.0, profile.util_avg + (profile.util_peak - profile.util_avg) * jitter)

    def _reading(self, gpu: GpuInfo, util: float, mem: int) -> GpuReading:
        tdp = self._tdp[gpu.uuid]
        return GpuReading(
            uuid=gpu.uuid,
            util_sm=round(util, 1),
            util_mem=round(util * 0.6, 1),
            mem_used_mib=mem,
            mem_total_mib=gpu.memory_mib,
            temperature_c=round(34.0 + 0.45 * util, 1),
            power_w=round(tdp * (0.12 + 0.88 * util / 100.0), 1),
        )


def _tdp_of(model_name: str) -> float:
    for m in CATALOG.values():
        if m.name == model_name:
            return m.tdp_w
    return 250.0
