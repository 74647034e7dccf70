"""Synthetic traces: Philly-like job sizes, Poisson arrivals, Gavel's 26 job types.

Each job draws one ``(duration_s, num_gpus)`` sample of the Philly trace
(``horus_core/data/philly_job_distribution.csv``), a job type among those measured at that GPU
count on the reference GPU type (``uniform``: every type alike; ``family``: every model family
alike, then a batch size), and converts the duration into ``total_steps`` with the type's
measured solo throughput. Arrivals form a Poisson process at ``rate`` jobs per hour starting at
t = 0. The same spec and seed give the same trace.
"""

from __future__ import annotations

import bisect
import csv
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from importlib import resources

import numpy as np

from horus_core.errors import InvalidArgument
from horus_core.sim.traces import TraceJob

# (job_type, gpus, gpu_type) -> measured solo steps/s, None (or 0) where unmeasured.
SoloFn = Callable[[str, int, str], "float | None"]

GAVEL_JOB_TYPES: tuple[str, ...] = (
    *(f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)),
    *(f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)),
    *(f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)),
    "A3C",
    "CycleGAN",
)
MIXES = ("uniform", "family")
PREFIX = "synthetic:"


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    jobs: int = 1000
    rate: float = 20.0  # jobs per hour
    seed: int = 0
    mix: str = "uniform"
    gpu_type: str = "v100"  # reference type for the duration -> steps conversion


def is_synthetic(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_synthetic(text: str) -> SyntheticSpec:
    """``synthetic:jobs=1000,rate=20,seed=0[,mix=family][,gpu_type=v100]``."""
    body = text.removeprefix(PREFIX)
    known = {f.name: f.type for f in fields(SyntheticSpec)}
    values: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, sep, raw = item.partition("=")
        if not sep or key.strip() not in known:
            raise InvalidArgument("trace", f"bad synthetic option {item!r}; known: {', '.join(known)}")
        values[key.strip()] = _convert(key.strip(), raw.strip())
    spec = SyntheticSpec(**values)  # type: ignore[arg-type]
    if spec.jobs < 1 or spec.rate <= 0:
        raise InvalidArgument("trace", "synthetic trace needs jobs >= 1 and rate > 0")
    if spec.mix not in MIXES:
        raise InvalidArgument("trace", f"synthetic mix must be one of {', '.join(MIXES)}, got {spec.mix!r}")
    return spec


def _convert(key: str, raw: str) -> object:
    try:
        if key in ("jobs", "seed"):
            return int(raw)
        if key == "rate":
            return float(raw)
    except ValueError:
        raise InvalidArgument("trace", f"synthetic option {key}: expected a number, got {raw!r}") from None
    return raw


@functools.cache
def philly_samples() -> tuple[tuple[float, int], ...]:
    """The packaged Philly (duration_s, num_gpus) samples."""
    source = resources.files("horus_core").joinpath("data/philly_job_distribution.csv")
    with source.open(encoding="utf-8") as fh:
        return tuple((float(r["duration_s"]), int(r["num_gpus"])) for r in csv.DictReader(fh))


def generate(
    spec: SyntheticSpec, solo: SoloFn, samples: Sequence[tuple[float, int]] | None = None
) -> list[TraceJob]:
    """A deterministic synthetic trace for ``spec``."""
    pool = samples if samples is not None else philly_samples()
    rng = np.random.default_rng(spec.seed)
    picks = rng.integers(0, len(pool), size=spec.jobs)
    type_draws = rng.random(spec.jobs)
    gaps = rng.exponential(3600.0 / spec.rate, size=spec.jobs)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)
    choosers: dict[int, _TypeChooser] = {}
    jobs = []
    for pick, draw, arrival in zip(picks.tolist(), type_draws.tolist(), arrivals.tolist(), strict=True):
        duration, gpus = pool[pick]
        if gpus not in choosers:
            choosers[gpus] = _TypeChooser.build(spec, gpus, solo)
        job_type, throughput = choosers[gpus].pick(draw)
        steps = max(1, round(duration * throughput))
        jobs.append(TraceJob(job_type=job_type, gpus=gpus, total_steps=steps, arrival_s=round(arrival, 3)))
    return jobs


def family(job_type: str) -> str:
    return job_type.split(" (", 1)[0]


@dataclass(frozen=True, slots=True)
class _TypeChooser:
    """Job types measured at one GPU count, with cumulative weights for a [0, 1) draw."""

    types: tuple[str, ...]
    throughputs: tuple[float, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def build(cls, spec: SyntheticSpec, gpus: int, solo: SoloFn) -> _TypeChooser:
        measured = [(t, solo(t, gpus, spec.gpu_type) or 0.0) for t in GAVEL_JOB_TYPES]
        usable = [(t, x) for t, x in measured if x > 0]
        if not usable:
            raise InvalidArgument("trace", f"no job type is measured at {gpus} GPU(s) on {spec.gpu_type}")
        if spec.mix == "family":
            per_family: dict[str, int] = {}
            for t, _ in usable:
                per_family[family(t)] = per_family.get(family(t), 0) + 1
            weights = [1.0 / per_family[family(t)] for t, _ in usable]
        else:
            weights = [1.0] * len(usable)
        total, running, cumulative = sum(weights), 0.0, []
        for w in weights:
            running += w / total
            cumulative.append(running)
        return cls(tuple(t for t, _ in usable), tuple(x for _, x in usable), tuple(cumulative))

    def pick(self, draw: float) -> tuple[str, float]:
        i = min(bisect.bisect_right(self.cumulative, draw), len(self.types) - 1)
        return self.types[i], self.throughputs[i]
