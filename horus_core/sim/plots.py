"""PNG plots of a comparison: JCT CDF, utilisation over time, per-job speed histogram.

matplotlib is imported lazily (Agg backend), so the simulator itself never needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from horus_core.sim.config import SLOW_THRESHOLD, SimResult

HOUR = 3600.0
TIMELINE_POINTS = 600


def write_plots(results: Mapping[str, SimResult], out_dir: Path, title: str = "") -> list[Path]:
    """Write jct_cdf.png, utilisation.png and speed_hist.png into ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = max(1, len(results))
    figures = (
        ("jct_cdf.png", _jct_cdf, 1, (7.0, 4.2)),
        ("utilisation.png", _utilisation, rows, (7.0, 1.1 * rows + 1.2)),
        ("speed_hist.png", _speeds, 1, (7.0, 4.2)),
    )
    paths = []
    for name, draw, nrows, size in figures:
        fig, axes = plt.subplots(nrows, 1, figsize=size, dpi=110, sharex=True, squeeze=False)
        draw(list(axes[:, 0]), results)
        if title:
            fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def _jct_cdf(axes: list[Any], results: Mapping[str, SimResult]) -> None:
    (ax,) = axes
    for policy, result in results.items():
        jcts = np.sort([r.jct for r in result.records if r.jct is not None]) / HOUR
        if jcts.size:
            ax.step(jcts, np.arange(1, jcts.size + 1) / jcts.size, where="post", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _utilisation(axes: list[Any], results: Mapping[str, SimResult]) -> None:
    """One panel per policy: useful work (solid) and GPUs busy (dotted), as fractions of the cluster."""
    for ax, (policy, result) in zip(axes, results.items(), strict=False):
        tl = result.timeline
        if len(tl.t) >= 2:
            t = np.frombuffer(tl.t, dtype=float)
            edges = np.linspace(t[0], t[-1], TIMELINE_POINTS + 1)
            mids = (edges[:-1] + edges[1:]) / 2 / HOUR
            useful = _bucket_means(t, np.frombuffer(tl.useful, dtype=float), edges) / result.gpus
            busy = _bucket_means(t, np.frombuffer(tl.busy, dtype=float), edges) / result.gpus
            ax.plot(mids, useful, lw=0.8, label="useful work")
            ax.plot(mids, busy, lw=0.8, ls=":", color="black", label="GPUs busy")
        ax.set_ylabel(policy, fontsize=8)
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("time (h); each panel: fraction of the cluster, bucket means")


def _bucket_means(t: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted means over buckets of a step function that holds ``values[i]`` from ``t[i]``."""
    integral = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(t))))
    at_edges = np.interp(edges, t, integral)
    means: np.ndarray = np.diff(at_edges) / np.diff(edges)
    return means


def _speeds(axes: list[Any], results: Mapping[str, SimResult]) -> None:
    (ax,) = axes
    bins = np.linspace(0.0, 1.05, 22)
    for policy, result in results.items():
        speeds = [r.mean_speed for r in result.records if r.run_s > 0]
        ax.hist(speeds, bins=bins, histtype="step", lw=1.2, label=policy)
    ax.axvline(SLOW_THRESHOLD, color="grey", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("job's mean normalised speed while running (1.0 = solo)")
    ax.set_ylabel("jobs (log scale)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
