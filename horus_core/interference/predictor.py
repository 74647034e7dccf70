"""From a model card and a GPU type to what the interference model needs of a job it has never
seen: solo utilisation (avg, peak), GPU memory, and the completion's per-job sensitivity and
intensity. Pure numpy; the weights are ``horus_core/data/predictor.json``, built by
``python -m horus_core.interference.train`` (docs/prediction.md gives the method and its errors).

One feature, a time on the GPU: the step's FLOPs over the GPU's peak FLOP/s plus its memory
traffic (parameters, gradients and optimizer state read and written twice, the saved activations
three times) over its bandwidth, a roofline's two bounds added. Utilisations are a logistic
function of its logarithm, sensitivity and intensity linear in it; memory is the bytes the card
counts (parameters, gradients, optimizer state, activations) plus a fixed part (the CUDA context
and the allocator's slack). Two features (the two times apart) and the operator count were tried
and predicted worse held out (docs/prediction.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from horus_core.interference.gpus import GPUS, REFERENCE_GPU, GpuSpec
from horus_core.modelcard import ModelCard

PREDICTOR_VERSION = 1
_MIN_SECONDS = 1e-7  # a card with no FLOPs (or no bytes) still has a finite logarithm
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Linear:
    """intercept + sum(weights * (x - mean) / scale)."""

    intercept: float
    weights: tuple[float, ...]

    def __call__(self, z: Sequence[float]) -> float:
        return self.intercept + sum(w * v for w, v in zip(self.weights, z, strict=True))


@dataclass(frozen=True, slots=True)
class CardPrediction:
    util_avg: float  # % of one GPU, on the table's scale (see module doc)
    util_peak: float
    mem_mib: int  # peak footprint as NVML counts it
    sensitivity: float  # the completion's row bias: how much this job suffers next to anyone
    intensity: float  # the column bias: how much it slows anyone


@dataclass(frozen=True, slots=True)
class Predictor:
    mean: tuple[float, ...]  # feature standardisation
    scale: tuple[float, ...]
    util_avg: Linear  # -> logit(util_avg / 100)
    util_peak: Linear  # -> logit(util_peak / 100)
    sensitivity: Linear
    intensity: Linear
    mem_base_mib: float
    mem_per_mib: float  # MiB of footprint per MiB the card counts
    reference_gpu: str = REFERENCE_GPU

    def features(self, card: ModelCard, gpu: GpuSpec) -> tuple[float, ...]:
        raw = (math.log10(max(roofline_seconds(card, gpu), _MIN_SECONDS)),)
        return tuple((x - m) / s for x, m, s in zip(raw, self.mean, self.scale, strict=True))

    def step_seconds(self, card: ModelCard, gpu_type: str) -> float:
        """One step's roofline time on ``gpu_type`` (the feature, before its logarithm): its
        ratios between GPU types are what :mod:`.cards` reads."""
        spec = GPUS.get(gpu_type) or GPUS[self.reference_gpu]
        return max(roofline_seconds(card, spec), _MIN_SECONDS)

    def predict(self, card: ModelCard, gpu_type: str | None = None) -> CardPrediction:
        """The job of ``card`` on ``gpu_type`` (unknown types: the reference GPU's figures)."""
        spec = GPUS.get(gpu_type or self.reference_gpu) or GPUS[self.reference_gpu]
        z = self.features(card, spec)
        avg = _percent(self.util_avg(z))
        peak = max(avg, _percent(self.util_peak(z)))
        mem = self.mem_base_mib + self.mem_per_mib * (card.static_bytes + card.activation_bytes) / _MIB
        return CardPrediction(avg, peak, max(1, math.ceil(mem)), self.sensitivity(z), self.intensity(z))


def roofline_seconds(card: ModelCard, gpu: GpuSpec) -> float:
    """FLOPs over peak FLOP/s plus bytes moved over bandwidth, for one training step."""
    half = card.amp or card.dtype != "float32"
    compute = card.flops_step / gpu.peak_flops(half)
    traffic = (2 * card.static_bytes + 3 * card.activation_bytes) / gpu.bandwidth
    return compute + traffic


def _percent(logit: float) -> float:
    return 100.0 / (1.0 + math.exp(-max(-30.0, min(30.0, logit))))


def predictor_to_dict(p: Predictor) -> dict[str, Any]:
    def lin(f: Linear) -> dict[str, Any]:
        return {"intercept": f.intercept, "weights": list(f.weights)}

    return {
        "version": PREDICTOR_VERSION,
        "reference_gpu": p.reference_gpu,
        "features": ["log10 (compute + memory-traffic) seconds per step"],
        "mean": list(p.mean),
        "scale": list(p.scale),
        "util_avg_logit": lin(p.util_avg),
        "util_peak_logit": lin(p.util_peak),
        "sensitivity": lin(p.sensitivity),
        "intensity": lin(p.intensity),
        "memory": {"base_mib": p.mem_base_mib, "per_mib": p.mem_per_mib},
    }


def predictor_from_dict(raw: Mapping[str, Any]) -> Predictor:
    if raw.get("version") != PREDICTOR_VERSION:
        raise ValueError(f"predictor version {raw.get('version')!r} is not {PREDICTOR_VERSION}")

    def lin(d: Mapping[str, Any]) -> Linear:
        return Linear(float(d["intercept"]), tuple(float(w) for w in d["weights"]))

    return Predictor(
        mean=tuple(float(x) for x in raw["mean"]),
        scale=tuple(float(x) for x in raw["scale"]),
        util_avg=lin(raw["util_avg_logit"]),
        util_peak=lin(raw["util_peak_logit"]),
        sensitivity=lin(raw["sensitivity"]),
        intensity=lin(raw["intensity"]),
        mem_base_mib=float(raw["memory"]["base_mib"]),
        mem_per_mib=float(raw["memory"]["per_mib"]),
        reference_gpu=str(raw["reference_gpu"]),
    )


def predictor_text(p: Predictor) -> str:
    return json.dumps(predictor_to_dict(p), indent=1) + "\n"


@lru_cache(maxsize=1)
def packaged_predictor() -> Predictor:
    """The predictor shipped in ``horus_core/data/predictor.json`` (parsed once, immutable)."""
    text = resources.files("horus_core.data").joinpath("predictor.json").read_text()
    return predictor_from_dict(json.loads(text))
