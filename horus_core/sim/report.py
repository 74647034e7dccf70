"""Text and JSON renderings of per-policy metrics."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from horus_core.sim.metrics import Metrics

# (metric key, column title, format) for the stdout table.
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct_h", "avg JCT h", "{:.2f}"),
    ("p50_jct_h", "p50 h", "{:.2f}"),
    ("p95_jct_h", "p95 h", "{:.2f}"),
    ("p99_jct_h", "p99 h", "{:.2f}"),
    ("makespan_h", "makespan h", "{:.1f}"),
    ("avg_queue_h", "queue h", "{:.2f}"),
    ("worst_queue_h_1gpu", "worst q 1g", "{:.1f}"),
    ("worst_queue_h_2gpu", "2g", "{:.1f}"),
    ("worst_queue_h_4gpu", "4g", "{:.1f}"),
    ("worst_queue_h_8gpu", "8g", "{:.1f}"),
    ("worst_queue_h_more", "9g+", "{:.1f}"),
    ("gpu_util", "busy", "{:.3f}"),
    ("useful_util", "useful", "{:.3f}"),
    ("useful_per_busy", "per busy", "{:.2f}"),
    ("slow_share", "slow", "{:.3f}"),
    ("slow_any_share", "slow any", "{:.3f}"),
    ("preemptions", "preempt", "{}"),
    ("evictions", "evict", "{}"),
    ("unfinished", "unfin.", "{}"),
    ("decide_ms_mean", "decide ms", "{:.2f}"),
    ("decide_ms_p95", "p95 ms", "{:.2f}"),
    ("decide_ms_max", "max ms", "{:.1f}"),
)


def format_table(results: Mapping[str, Metrics]) -> str:
    """The table, a policy that left jobs unfinished marked (``*``: some, ``FAILED``: all) and
    said so under it: its JCT figures are not comparable with the others'."""
    header = ["policy", *(title for _, title, _ in TABLE_COLUMNS)]
    rows = [
        [_name(name, metrics), *(_cell(fmt, metrics[key]) for key, _, fmt in TABLE_COLUMNS)]
        for name, metrics in results.items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, *completion_notes(results)])


def failed(metrics: Metrics) -> bool:
    """A run that finished none of its jobs (a policy that placed nothing, or stalled at once)."""
    return metrics["jobs"] > 0 and metrics["unfinished"] == metrics["jobs"]


def _name(name: str, metrics: Metrics) -> str:
    if failed(metrics):
        return f"{name} FAILED"
    return f"{name}*" if metrics["unfinished"] else name


def completion_notes(results: Mapping[str, Metrics]) -> list[str]:
    """One line per policy that left jobs unfinished."""
    notes = []
    for name, m in results.items():
        jobs, left = int(m["jobs"]), int(m["unfinished"])
        if failed(m):
            notes.append(f"{name} FAILED: it finished none of the {jobs} jobs (no completion times)")
        elif left:
            notes.append(
                f"{name}*: {left} of {jobs} jobs did not finish; its JCT figures count the "
                f"{jobs - left} finished ones only and do not compare with a complete run"
            )
    return notes


def _cell(fmt: str, value: float | int) -> str:
    """``value`` in ``fmt``; "-" for NaN (a worst queueing with no job of that size)."""
    return "-" if isinstance(value, float) and math.isnan(value) else fmt.format(value)


def to_json(results: Mapping[str, Metrics]) -> str:
    """``{policy: {metric: value}}`` with non-finite numbers as null."""
    clean = {name: {k: _finite(v) for k, v in m.items()} for name, m in results.items()}
    return json.dumps(clean, indent=2, sort_keys=False)


def _finite(value: float | int) -> float | int | None:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
