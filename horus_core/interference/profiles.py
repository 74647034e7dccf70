"""Profiles of the Gavel job types, the conservative default, and the analytic model.

``GAVEL_PROFILES`` maps each job type of the packaged throughput table to
(util avg %, util peak %, memory MiB). The numbers were derived from the table itself, not
measured directly: see :mod:`horus_core.interference.derive` for the procedure, and run
``python -m horus_core.interference.derive`` to reproduce them. In short, utilisations are the
ones that best explain the 640 measured V100 pair slowdowns under :func:`analytic_speed`
(least squares), and memory footprints are the ones closest to a per-family prior that make
the table's ``[0, 0]`` (out of memory) pairs exactly the pairs that do not fit on 16 GB GPUs
(2 of 702 outcomes disagree) while each job still fits alone on a 12 GB K80, where the table
measured it.
"""

from __future__ import annotations

from collections.abc import Mapping

from horus_core.interference.gpus import GPUS

RESERVE_MIB = 500  # keep more than this free on a GPU after every placement (docs/placement.md section 2)

# Analytic model, fitted with the profiles below (derive.py): alpha = slowdown per 100 % of
# co-runner utilisation while the GPU is not oversubscribed; gamma = steepness beyond 100 %.
ALPHA = 0.131
GAMMA = 2.0

# A job nothing is known about is assumed heavy: most of a GPU and 10 GiB, so on 16 GB GPUs it
# shares only with small jobs and never pushes a GPU far past 100 %.
DEFAULT_PROFILE: tuple[float, float, int] = (85.0, 100.0, 10240)

# Memory (MiB, as NVML reports it) of common GPU families, for callers that know only the type.
GPU_TYPE_MEMORY_MIB: Mapping[str, int] = {name: spec.memory_mib for name, spec in GPUS.items()}
DEFAULT_GPU_MEMORY_MIB = 16160

GAVEL_PROFILES: Mapping[str, tuple[float, float, int]] = {
    "ResNet-18 (batch size 16)": (17.9, 48.3, 844),
    "ResNet-18 (batch size 32)": (25.1, 57.1, 988),
    "ResNet-18 (batch size 64)": (33.2, 58.4, 1276),
    "ResNet-18 (batch size 128)": (36.5, 57.8, 1852),
    "ResNet-18 (batch size 256)": (53.8, 70.0, 3004),
    "ResNet-50 (batch size 16)": (65.8, 100.0, 3100),
    "ResNet-50 (batch size 32)": (68.2, 100.0, 4720),
    "ResNet-50 (batch size 64)": (75.1, 88.8, 7829),
    "ResNet-50 (batch size 128)": (76.4, 82.3, 10940),
    "Transformer (batch size 16)": (23.7, 88.5, 2140),
    "Transformer (batch size 32)": (23.3, 90.4, 2780),
    "Transformer (batch size 64)": (26.5, 90.8, 4720),
    "Transformer (batch size 128)": (31.3, 85.0, 4840),
    "Transformer (batch size 256)": (68.4, 68.6, 10817),
    "A3C": (28.7, 91.2, 4720),
    "LM (batch size 5)": (25.4, 93.7, 4720),
    "LM (batch size 10)": (26.9, 84.2, 4720),
    "LM (batch size 20)": (29.7, 84.2, 4720),
    "LM (batch size 40)": (35.2, 81.6, 4720),
    "LM (batch size 80)": (42.9, 78.8, 4962),
    "Recommendation (batch size 512)": (35.9, 100.0, 1307),
    "Recommendation (batch size 1024)": (35.0, 97.8, 1614),
    "Recommendation (batch size 2048)": (35.2, 93.1, 4720),
    "Recommendation (batch size 4096)": (32.1, 83.7, 4840),
    "Recommendation (batch size 8192)": (37.3, 100.0, 5915),
    "CycleGAN": (43.9, 90.7, 4962),
}


def analytic_speed(own_peak: float, others_avg: float, alpha: float = ALPHA, gamma: float = GAMMA) -> float:
    """Normalised speed of a job with peak utilisation ``own_peak`` (%) next to co-runners whose
    average utilisations sum to ``others_avg`` (%): little slowdown while the sum stays within
    one GPU, falling as the square of the oversubscription beyond it (``alpha`` and ``gamma``:
    the V100 fit, or a GPU type's own, :mod:`.analytic`)."""
    base = max(0.0, 1.0 - alpha * others_avg / 100.0)
    load = own_peak + others_avg
    if others_avg <= 0.0 or load <= 100.0:
        return base
    return float(base * (100.0 / load) ** gamma)


def gpu_memory_of(gpu_type: str) -> int:
    return GPU_TYPE_MEMORY_MIB.get(gpu_type, DEFAULT_GPU_MEMORY_MIB)
