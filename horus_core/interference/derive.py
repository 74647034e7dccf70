"""How the per-job-type profiles in :mod:`horus_core.interference.profiles` were derived.

Offline and reproducible: ``python -m horus_core.interference.derive`` prints the table that
``profiles.GAVEL_PROFILES`` holds (a test checks they agree). Needs SciPy; nothing at run time
imports this module.

Utilisation. The analytic model (:func:`profiles.analytic_speed`) says a job with peak
utilisation ``p`` sharing a GPU with jobs of summed average utilisation ``U`` runs at
``1 - alpha * U / 100`` of its solo speed while ``p + U <= 100`` and that times
``(100 / (p + U)) ** GAMMA`` above. We fit ``alpha`` and every job type's (avg, peak), with
``peak >= avg``, by least squares to all 640 measured, feasible V100 pair speeds. The
utilisations are therefore the ones that best explain how much each job slows its partners
and is slowed by them (RMS error 0.138, against 0.240 for a constant).

Memory. Footprints are not in the table, but its ``[0, 0]`` entries (the pair ran out of
memory) are: on the 16 GB V100 and P100 a pair fits iff ``mem_a + mem_b < capacity - 500 MiB``.
A small integer program (HiGHS via SciPy) first minimises the number of measured outcomes this
rule gets wrong (2 of 702) and then the L1 distance to a documented prior (a rough footprint
per model family growing linearly with batch size), keeping every job small enough to run
alone on a 12 GB K80 (the table measured them all there). K80 pair outcomes are left out: no
footprints explain them together with the 16 GB ones (10 wrong with them); the K80 ``[0, 0]``
entries still apply as such on GPUs of 12 GB or less (``InterferenceModel.fits``). The OOM
pairs force some small models up: LM and A3C must not fit next to ResNet-50 (batch 128).
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from horus_core.interference.profiles import GAMMA, RESERVE_MIB
from horus_core.interference.table import TABLE_GPU_MEMORY_MIB, ThroughputTable, packaged_table

Matrix = NDArray[np.float64]

_MEMORY_FIT_TYPES = ("v100", "p100")

# Prior footprint (MiB) = base + per_sample * batch size; only a starting point for the program.
_PRIOR: dict[str, tuple[float, float]] = {
    "ResNet-18": (700.0, 9.0),  # CIFAR-10, 32x32 images
    "ResNet-50": (1500.0, 100.0),  # ImageNet, 224x224
    "Transformer": (1500.0, 40.0),
    "LM": (1200.0, 50.0),
    "Recommendation": (1000.0, 0.6),
    "A3C": (1200.0, 0.0),
    "CycleGAN": (5000.0, 0.0),
}


def prior_memory(job_type: str) -> float:
    family = job_type.split(" ")[0]
    match = re.search(r"batch size (\d+)", job_type)
    base, per_sample = _PRIOR[family]
    return base + per_sample * (int(match.group(1)) if match else 0)


def speed_matrix(table: ThroughputTable, gpu_type: str) -> Matrix:
    """``S[i, j]`` = normalised speed of job type i when sharing one GPU with job type j."""
    types = table.job_types
    out = np.zeros((len(types), len(types)))
    for i, a in enumerate(types):
        for j, b in enumerate(types):
            out[i, j] = table.pairs[(gpu_type, a, b)][0]
    return out


def fit_utilisation(speeds: Matrix) -> tuple[Matrix, Matrix, float, float]:
    """Least-squares fit of (util avg, util peak) per type and alpha; returns them and the RMSE."""
    from scipy.optimize import least_squares

    n = speeds.shape[0]
    rows, cols = np.nonzero(speeds > 0.0)
    target = speeds[rows, cols]

    def predict(x: Matrix) -> Matrix:
        avg, peak, alpha = x[:n], x[:n] + x[n : 2 * n], x[2 * n]
        load = peak[rows] + avg[cols]
        base = 1.0 - alpha * avg[cols] / 100.0
        out: Matrix = np.where(load <= 100.0, base, base * (100.0 / load) ** GAMMA)
        return out

    x0 = np.concatenate([np.full(n, 50.0), np.full(n, 10.0), [0.1]])
    lower = np.concatenate([np.full(n, 1.0), np.zeros(n), [0.0]])
    upper = np.concatenate([np.full(n, 100.0), np.full(n, 99.0), [0.5]])
    fit = least_squares(lambda x: predict(x) - target, x0, bounds=(lower, upper))
    avg = fit.x[:n]
    peak = np.minimum(100.0, avg + fit.x[n : 2 * n])
    rmse = float(np.sqrt(np.mean((predict(fit.x) - target) ** 2)))
    return avg, peak, float(fit.x[2 * n]), rmse


def fit_memory(table: ThroughputTable) -> tuple[Matrix, int]:
    """Footprints (MiB) and the number of measured fit / no-fit outcomes they get wrong."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    types = table.job_types
    n = len(types)
    outcomes = _memory_outcomes(table)
    m = len(outcomes)
    big = 4.0 * max(TABLE_GPU_MEMORY_MIB.values())
    # variables: mem (n), miss flags (m), |mem - prior| as pos (n) and neg (n) parts
    a = np.zeros((m + n, 3 * n + m))
    lo = np.full(m + n, -np.inf)
    hi = np.full(m + n, np.inf)
    for row, (i, j, limit, fits) in enumerate(outcomes):
        a[row, i] += 1.0
        a[row, j] += 1.0
        if fits:
            a[row, n + row], hi[row] = -big, limit - 1.0
        else:
            a[row, n + row], lo[row] = big, limit
    for i, job_type in enumerate(types):
        row = m + i
        a[row, i], a[row, n + m + i], a[row, 2 * n + m + i] = 1.0, -1.0, 1.0
        lo[row] = hi[row] = prior_memory(job_type)
    cost = np.concatenate([np.zeros(n), np.full(m, 1e6), np.ones(2 * n)])
    integrality = np.concatenate([np.ones(n), np.ones(m), np.zeros(2 * n)])  # whole MiB
    smallest = min(TABLE_GPU_MEMORY_MIB.values()) - RESERVE_MIB - 1.0  # alone, it ran even on a K80
    lower = np.zeros(3 * n + m)
    lower[:n] = 256.0
    upper = np.full(3 * n + m, np.inf)
    upper[:n], upper[n : n + m] = smallest, 1.0
    res = milp(
        cost, constraints=LinearConstraint(a, lo, hi), integrality=integrality, bounds=Bounds(lower, upper)
    )
    return np.round(res.x[:n]), round(float(np.sum(res.x[n : n + m])))


def _memory_outcomes(table: ThroughputTable) -> list[tuple[int, int, float, bool]]:
    types = table.job_types
    out = []
    for gpu_type in _MEMORY_FIT_TYPES:
        capacity = TABLE_GPU_MEMORY_MIB[gpu_type]
        for i, a in enumerate(types):
            for j in range(i, len(types)):
                fits = table.pairs[(gpu_type, a, types[j])][0] > 0.0
                out.append((i, j, float(capacity - RESERVE_MIB), fits))
    return out


def derive(table: ThroughputTable | None = None) -> dict[str, tuple[float, float, int]]:
    """job type -> (util avg %, util peak %, memory MiB), rounded as stored in profiles.py."""
    table = table or packaged_table()
    avg, peak, _alpha, _rmse = fit_utilisation(speed_matrix(table, "v100"))
    mem, _misses = fit_memory(table)
    return {
        t: (round(float(avg[i]), 1), round(float(peak[i]), 1), int(mem[i]))
        for i, t in enumerate(table.job_types)
    }


def main() -> None:
    table = packaged_table()
    avg, peak, alpha, rmse = fit_utilisation(speed_matrix(table, "v100"))
    mem, misses = fit_memory(table)
    print(f"# alpha={alpha:.3f} rmse={rmse:.3f} memory outcomes wrong={misses}")
    for i, t in enumerate(table.job_types):
        print(f'    "{t}": ({avg[i]:.1f}, {peak[i]:.1f}, {int(mem[i])}),')


if __name__ == "__main__":
    main()
