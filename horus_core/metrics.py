"""Prometheus metric families shared by the master and the worker: per GPU and per job on a GPU.

GPU families use dcgm-exporter's names, units and labels (``gpu``, ``UUID``, ``modelName``,
``Hostname``) so that dashboards built for dcgm-exporter work unchanged. Job families are Horus's
own (docs/observability.md). Everything here builds families from plain samples; collecting the
samples is the daemons' job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

MIB = 1 << 20
GPU_LABELS = ("gpu", "UUID", "modelName", "Hostname")
JOB_LABELS = ("job", "queue", "user", "gpu", "UUID")
DEFAULT_QUEUE = "default"  # the queue label of a job without one (the master runs without --queues)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU's latest reading, in dcgm-exporter's units."""

    node: str
    index: int
    uuid: str
    model: str
    util: float  # %
    mem_used_mib: int
    mem_total_mib: int
    temperature_c: float
    power_w: float

    def labels(self) -> list[str]:
        return [str(self.index), self.uuid, self.model, self.node]


@dataclass(frozen=True, slots=True)
class JobGpuSample:
    """One job's use of one GPU; the speeds are known on the master only (None: unknown)."""

    job: str
    user: str
    gpu_index: int
    uuid: str
    util: float
    mem_used_mib: int
    speed: float | None = None
    predicted_speed: float | None = None
    queue: str = DEFAULT_QUEUE

    def labels(self) -> list[str]:
        return [self.job, self.queue, self.user, str(self.gpu_index), self.uuid]


_GPU_METRICS: tuple[tuple[str, str, Callable[[GpuSample], float]], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda s: s.util),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda s: s.mem_used_mib),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        lambda s: max(0, s.mem_total_mib - s.mem_used_mib),
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda s: s.temperature_c),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda s: s.power_w),
)


def gpu_families(samples: Iterable[GpuSample]) -> list[Metric]:
    """The five dcgm-exporter gauges, one series per GPU."""
    rows = list(samples)
    out: list[Metric] = []
    for name, help_text, value in _GPU_METRICS:
        fam = GaugeMetricFamily(name, help_text, labels=GPU_LABELS)
        for s in rows:
            fam.add_metric(s.labels(), float(value(s)))
        out.append(fam)
    return out


def job_families(samples: Iterable[JobGpuSample]) -> list[Metric]:
    """Per job and GPU: utilisation, memory, and (where known) measured and predicted speed."""
    util = GaugeMetricFamily(
        "horus_job_gpu_utilization", "The job's own GPU utilisation on this GPU (in %).", labels=JOB_LABELS
    )
    mem = GaugeMetricFamily(
        "horus_job_gpu_memory_used_bytes",
        "GPU memory the job's processes use on this GPU.",
        labels=JOB_LABELS,
    )
    speed = GaugeMetricFamily(
        "horus_job_speed_ratio",
        "Measured throughput over the job's solo throughput (1.0 = as fast as alone).",
        labels=JOB_LABELS,
    )
    predicted = GaugeMetricFamily(
        "horus_job_predicted_speed_ratio",
        "Speed over solo the scheduler predicted when it placed the job.",
        labels=JOB_LABELS,
    )
    for s in samples:
        labels = s.labels()
        util.add_metric(labels, s.util)
        mem.add_metric(labels, float(s.mem_used_mib * MIB))
        if s.speed is not None:
            speed.add_metric(labels, s.speed)
        if s.predicted_speed is not None:
            predicted.add_metric(labels, s.predicted_speed)
    return [util, mem, speed, predicted]


_DIGITS = re.compile(r"[0-9#]+(?:\.[0-9#]+)?")  # ('#': digits the store masked already)
MAX_REASON = 120


def reason_label(reason: str) -> str:
    """A pending reason as a label value with bounded cardinality: numbers become ``N``
    (also where the store already masked their digits as ``#``)."""
    text = _DIGITS.sub("N", " ".join(reason.split())) or "unknown"
    return text[:MAX_REASON]
