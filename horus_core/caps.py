"""GPU memory caps (issue 31, docs/sharing.md): the sizes users write, the margin over a measured
footprint, and the cap each attempt gets (pure).

A job's cap is what it may use on each GPU it shares: its declared ``JobSpec.gpu_memory_mib``,
else the footprint the interference model holds for its workload (a measured peak carries
:func:`with_margin`). The packing counts each job at its cap, so the caps on a GPU never exceed its
memory less the reserve. A job with its GPUs to itself (``exclusive``) has no cap to keep: the
worker enforces none. A job stopped for its memory while sharing runs alone from then on
(:func:`alone`), with its measured peak plus the margin as its new cap (:func:`raised`).
"""

from __future__ import annotations

import dataclasses
import math
import re

from horus_core.model import JobSpec

MARGIN_FRACTION = 0.10  # a measured peak footprint + 10 % ...
MARGIN_MIN_MIB = 256  # ... and at least 256 MiB ...
STEP_MIB = 256  # ... rounded up to 256 MiB: the cap of a job whose footprint was measured
MAX_GPU_MEMORY_MIB = 1 << 22  # 4 TiB: beyond any GPU (a bound on untrusted input)

# MiB per unit: binary for MiB/GiB/TiB and Docker's bare M/G/T; decimal (SI) for MB/GB/TB, as
# disk and GPU vendors write them (4GB = 4e9 bytes = 3815 MiB).
_MB = 1e6 / 2**20
_UNITS = {"": 1.0, "m": 1.0, "mib": 1.0, "g": 1024.0, "gib": 1024.0, "t": 1024.0**2, "tib": 1024.0**2}
_UNITS |= {"mb": _MB, "gb": 1e3 * _MB, "tb": 1e6 * _MB}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def with_margin(mib: int) -> int:
    """A measured peak footprint as a cap: + :data:`MARGIN_FRACTION` (at least
    :data:`MARGIN_MIN_MIB`), rounded up to :data:`STEP_MIB`."""
    if mib <= 0:
        return 0
    padded = mib + max(MARGIN_MIN_MIB, math.ceil(mib * MARGIN_FRACTION))
    return -(-padded // STEP_MIB) * STEP_MIB


def raised(cap_mib: int, peak_mib: int) -> int:
    """The new cap of an attempt stopped for its memory: the larger of its cap and its measured
    peak, with the margin."""
    return with_margin(max(cap_mib, peak_mib))


def alone(spec: JobSpec, cap_mib: int) -> JobSpec:
    """The spec a contained job runs with from now on: its GPUs to itself, cap ``cap_mib``."""
    if spec.exclusive and spec.gpu_memory_mib == cap_mib:
        return spec
    return dataclasses.replace(spec, exclusive=True, gpu_memory_mib=cap_mib)


def attempt_cap(spec: JobSpec, footprint_mib: int) -> int:
    """The cap of an attempt at placement: the declared one, else the workload's footprint
    (``footprint_mib``: what the packing counted for it)."""
    return spec.gpu_memory_mib if spec.gpu_memory_mib > 0 else max(0, footprint_mib)


def parse_size(text: str) -> int:
    """A size as users write it, in MiB (rounded up): ``12GiB``, ``12G``, ``4096MiB``, ``4096``
    (no unit: MiB) in binary units; ``16GB``, ``500MB`` in decimal ones (16GB = 15259 MiB).
    Raises ValueError with a clear message."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (e.g. 12GiB, 512MiB, 4096, 16GB)")
    mib = float(match.group(1)) * _UNITS[unit]
    if not 0 < mib <= MAX_GPU_MEMORY_MIB:
        raise ValueError(
            f"memory size out of range: {text!r} (more than 0 and at most {MAX_GPU_MEMORY_MIB // 1024**2} "
            "TiB; for no declared cap leave the size out)"
        )
    return math.ceil(mib - 1e-9)  # (a whole number of MiB stays itself)


def format_mib(mib: int) -> str:
    """``12 GiB`` for whole GiB, else ``4200 MiB``; ``-`` for 0."""
    if mib <= 0:
        return "-"
    return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"
