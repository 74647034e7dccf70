"""Summary figures of one run. Times are in hours (as Gavel reports them), compute in ms.

- ``makespan_h``: first arrival to last completion.
- ``avg_jct_h`` / ``p50_jct_h`` / ``p95_jct_h`` / ``p99_jct_h``: completion minus arrival,
  finished jobs only (percentiles by linear interpolation, numpy's default); NaN (null in JSON)
  when no job finished: a policy that finished nothing has no completion time, not 0 h.
- ``avg_queue_h``: first start minus arrival (jobs that started).
- ``worst_queue_h_1gpu`` / ``_2gpu`` / ``_4gpu`` / ``_8gpu`` / ``_more``: the longest total
  pending time of any job of that GPU count (``_4gpu``: 3 or 4 GPUs, ``_8gpu``: 5 to 8, ``_more``:
  9 or more). Total pending time is all the time from arrival to completion (or to the end of the
  run, for a job left unfinished) that the job held no GPU: its first wait plus every wait after
  a preemption, i.e. JCT minus run time. NaN (null in JSON) where no job has that GPU count.
- ``gpu_util``: busy GPU-time / (GPUs x makespan); a GPU is busy while any job holds it.
- ``useful_util``: time-average of the sum over jobs of normalised speed x GPUs, divided by the
  GPU count: 1.0 means every GPU does one solo job's worth of work; packing can exceed it.
- ``useful_per_busy``: useful_util / gpu_util, the solo-equivalent work of one busy GPU: above 1
  when sharing pays, below 1 when co-runners slow each other more than sharing gains.
- ``slow_share``: share of started jobs whose time-weighted mean speed was below 0.8 of solo.
- ``slow_any_share``: share of started jobs that ran below 0.8 of solo for any time at all.
- ``spread_share``: share of started gangs (jobs of 2+ GPUs) that ran on more than one node
  at some attempt (issue 11; their rate pays the crossing cost of :mod:`horus_core.sim.scaling`).
- ``dropped``: actions the live master would have refused (and the simulator dropped too).
- ``decide_ms_mean`` / ``_p95`` / ``_max``: wall time of one ``policy.decide()`` call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from horus_core.sim.config import SLOW_THRESHOLD, SimResult
from horus_core.sim.state import JobRecord

Metrics = dict[str, float | int]

HOUR = 3600.0
# (key suffix, fewest GPUs, most GPUs) of the worst-queueing buckets.
GPU_BUCKETS = (("1gpu", 1, 1), ("2gpu", 2, 2), ("4gpu", 3, 4), ("8gpu", 5, 8), ("more", 9, 1 << 30))
# Column order of the table; every key of :func:`summarize`.
METRIC_KEYS = (
    "jobs",
    "unfinished",
    "makespan_h",
    "avg_jct_h",
    "p50_jct_h",
    "p95_jct_h",
    "p99_jct_h",
    "avg_queue_h",
    *(f"worst_queue_h_{name}" for name, _, _ in GPU_BUCKETS),
    "gpu_util",
    "useful_util",
    "useful_per_busy",
    "slow_share",
    "slow_any_share",
    "rounds",
    "preemptions",
    "migrations",
    "evictions",
    "dropped",
    "resizes",
    "spread_share",
    "decide_ms_mean",
    "decide_ms_p95",
    "decide_ms_max",
    "sim_s",
)


def summarize(result: SimResult, slow_threshold: float = SLOW_THRESHOLD) -> Metrics:
    records = result.records
    jcts = np.array([r.jct for r in records if r.jct is not None], dtype=float)
    started = [r for r in records if r.first_start is not None]
    queues = np.array([r.queueing for r in started], dtype=float)
    gangs = [r for r in started if r.gpus > 1]
    finishes = [r.finish for r in records if r.finish is not None]
    end = max(finishes) if len(finishes) == len(records) and finishes else result.end
    span = max(end - result.start, 0.0)
    capacity = result.gpus * span
    decide_ms = np.array(result.decide_s, dtype=float) * 1000.0
    return {
        "jobs": len(records),
        "unfinished": len(records) - len(finishes),
        "makespan_h": span / HOUR,
        "avg_jct_h": _mean(jcts, math.nan) / HOUR,
        "p50_jct_h": _pct(jcts, 50, math.nan) / HOUR,
        "p95_jct_h": _pct(jcts, 95, math.nan) / HOUR,
        "p99_jct_h": _pct(jcts, 99, math.nan) / HOUR,
        "avg_queue_h": _mean(queues) / HOUR,
        **worst_queueing(records, result.end),
        "gpu_util": result.busy_gpu_s / capacity if capacity else 0.0,
        "useful_util": result.useful_gpu_s / capacity if capacity else 0.0,
        "useful_per_busy": result.useful_gpu_s / result.busy_gpu_s if result.busy_gpu_s else 0.0,
        "slow_share": _share(sum(1 for r in started if r.mean_speed < slow_threshold), len(started)),
        "slow_any_share": _share(sum(1 for r in started if r.slow_s > 0), len(started)),
        "rounds": result.counters.get("rounds", 0),
        "preemptions": result.counters.get("preemptions", 0),
        "migrations": result.counters.get("migrations", 0),
        "evictions": result.counters.get("evictions", 0),
        "dropped": result.counters.get("dropped", 0),
        "resizes": result.counters.get("resizes", 0),
        "spread_share": _share(sum(1 for r in gangs if r.nodes > 1), len(gangs)),
        "decide_ms_mean": _mean(decide_ms),
        "decide_ms_p95": _pct(decide_ms, 95),
        "decide_ms_max": float(decide_ms.max()) if decide_ms.size else 0.0,
        "sim_s": result.wall_s,
    }


def worst_queueing(records: Sequence[JobRecord], end: float) -> dict[str, float]:
    """``worst_queue_h_<bucket>``: the longest total pending time (hours) per GPU-count bucket
    (:data:`GPU_BUCKETS`; NaN where the bucket has no job); see the module doc."""
    worst = dict.fromkeys((f"worst_queue_h_{name}" for name, _, _ in GPU_BUCKETS), math.nan)
    for r in records:
        waited = max((end if r.finish is None else r.finish) - r.arrival - r.run_s, 0.0) / HOUR
        key = next(f"worst_queue_h_{name}" for name, lo, hi in GPU_BUCKETS if lo <= r.gpus <= hi)
        if not waited <= worst[key]:  # (NaN: the bucket's first job)
            worst[key] = waited
    return worst


def _mean(values: np.ndarray, empty: float = 0.0) -> float:
    return float(values.mean()) if values.size else empty


def _pct(values: np.ndarray, q: float, empty: float = 0.0) -> float:
    return float(np.percentile(values, q)) if values.size else empty


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0
