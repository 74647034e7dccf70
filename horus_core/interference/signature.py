"""Job signatures (the key of profiles and pair data) and profiles from user hints."""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.interference.profiles import DEFAULT_PROFILE
from horus_core.model import JobSpec, ProfileHints
from horus_core.modelcard import card_signature

HINT_PREFIX = "hints:"
DEFAULT_SIGNATURE = "default"
# A job with a declared GPU memory cap is packed as its signature with that memory
# (``demand_key``): "ResNet-50 (batch size 64)|gpu_memory=12288". docs/sharing.md.
CAP_MARK = "|gpu_memory="
_UTIL_STEP = 5.0  # hints are rounded so that similar jobs share a signature (and a packing class)
_MEM_STEP = 256


@dataclass(frozen=True, slots=True)
class JobProfile:
    util_avg: float  # % of one GPU
    util_peak: float
    mem_mib: int
    source: str  # "measured" | "table" | "card" | "hints" | "default"


def signature_of(spec: JobSpec) -> str:
    """``job_type`` when set; else the model card's identity; else a stable key built from the
    (rounded) hints."""
    if spec.job_type:
        return spec.job_type
    if spec.model_card is not None:
        return card_signature(spec.model_card)
    hints = _rounded(spec.hints)
    if hints == ProfileHints():
        return DEFAULT_SIGNATURE
    return f"{HINT_PREFIX}avg={_fmt(hints.util_avg)},peak={_fmt(hints.util_peak)},mem={_fmt(hints.mem_mib)}"


def demand_key(spec: JobSpec) -> str:
    """What the packing knows a job by: its signature, with its declared GPU memory cap if any
    (the cap replaces the workload's footprint; speeds stay the signature's)."""
    sig = signature_of(spec)
    return f"{sig}{CAP_MARK}{spec.gpu_memory_mib}" if spec.gpu_memory_mib > 0 else sig


def split_demand(key: str) -> tuple[str, int]:
    """``(signature, declared cap in MiB or 0)`` of a :func:`demand_key`."""
    if CAP_MARK not in key:
        return key, 0
    sig, _, cap = key.rpartition(CAP_MARK)
    return sig, int(cap)


def hints_of_signature(signature: str) -> ProfileHints | None:
    """The hints a ``hints:`` signature encodes, None for any other signature."""
    if not signature.startswith(HINT_PREFIX):
        return None
    fields = dict(part.split("=", 1) for part in signature[len(HINT_PREFIX) :].split(","))
    avg, peak, mem = (fields.get(k, "-") for k in ("avg", "peak", "mem"))
    return ProfileHints(
        util_avg=None if avg == "-" else float(avg),
        util_peak=None if peak == "-" else float(peak),
        mem_mib=None if mem == "-" else int(mem),
    )


def profile_from_hints(hints: ProfileHints) -> JobProfile:
    """Fill what the user left out: peak = avg + 25, avg = 0.7 x peak, else the default."""
    d_avg, d_peak, d_mem = DEFAULT_PROFILE
    avg, peak = hints.util_avg, hints.util_peak
    if avg is None and peak is None:
        avg, peak = d_avg, d_peak
    elif peak is None:
        assert avg is not None
        peak = min(100.0, avg + 25.0)
    elif avg is None:
        avg = 0.7 * peak
    avg, peak = _clamp(avg), _clamp(peak)
    mem = d_mem if hints.mem_mib is None else max(1, hints.mem_mib)
    return JobProfile(avg, max(avg, peak), mem, "hints")


def default_profile() -> JobProfile:
    avg, peak, mem = DEFAULT_PROFILE
    return JobProfile(avg, peak, mem, "default")


def _rounded(hints: ProfileHints) -> ProfileHints:
    def util(x: float | None) -> float | None:
        return None if x is None else _clamp(round(x / _UTIL_STEP) * _UTIL_STEP)

    mem = None if hints.mem_mib is None else -(-max(1, hints.mem_mib) // _MEM_STEP) * _MEM_STEP
    return ProfileHints(util(hints.util_avg), util(hints.util_peak), mem)


def _clamp(util: float) -> float:
    return min(100.0, max(0.0, float(util)))


def _fmt(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"
