"""Which GPU type each job should run on: an allocation over effective throughput (``horus`` on a
cluster of several GPU types), the linear program Gavel solves with co-location in it.

The jobs in it are the running ones, then the pending ones in the snapshot's order (the order
they arrived in, not the policy's), as far as the cluster has room for them: their GPUs summed
up to ``slots`` jobs per GPU. Variables ``alone[j, t]`` and ``shared[j, t]``: the share of job
j's time on type t alone on its GPUs, and sharing them with one other job. Maximise

    sum_j sum_t e[j, t] * (alone[j, t] + pair[j, t] * shared[j, t])

where ``e[j, t]`` is the job's solo speed on t over its best (5 % more on the type a running job
is on: a move must gain more than that) and ``pair[j, t]`` its mean speed on t sharing with the
others of the program (the interference model's pair speeds), such that every job gets at most
its whole time (``sum_t alone + shared <= 1``), and no type more than its GPUs alone
(``sum_j gpus[j] * alone[j, t] <= GPUs of t``) nor ``slots - 1`` times them sharing. A job's
type is the one it gets the largest share of: the jobs that lose most on a slow type get the
fast ones (comparative advantage), and a type is packed where its jobs share well.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from horus_core.interference import InterferenceModel
from horus_core.model import Job

STAY = 1.05  # a running job's own type counts this much more (a move must gain more)
MAX_JOBS = 512  # the program's jobs at most (the first of them): a pass stays well under 200 ms
F64 = NDArray[np.float64]


def allocate(
    jobs: Sequence[Job],
    capacity: Mapping[str, int],
    model: InterferenceModel,
    slots: float = 2.0,
    here: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Job id -> the GPU type the allocation gives it most of (jobs given none: absent).
    ``jobs``: running first, then pending; ``capacity``: GPUs per type; ``here``: running job
    id -> the type it runs on."""
    types = sorted(t for t, n in capacity.items() if n > 0)
    chosen = _in_reach(jobs, slots * sum(capacity[t] for t in types))
    if len(types) < 2 or not chosen:
        return {}
    n, k = len(chosen), len(types)
    eff = _solo(chosen, types, model, here or {})
    gain = np.concatenate([eff.ravel(), (eff * _pair_speeds(chosen, types, model)).ravel()])
    gpus = np.array([max(1, j.spec.gpus) for j in chosen], dtype=np.float64)
    per_job = sp.kron(sp.eye(n), np.ones((1, k)))
    per_type = sp.kron(gpus.reshape(1, n), sp.eye(k))
    rows = sp.vstack([sp.hstack([per_job, per_job]), sp.block_diag([per_type, per_type])]).tocsr()
    cap = np.array([capacity[t] for t in types], dtype=np.float64)
    limits = np.concatenate([np.ones(n), cap, max(0.0, slots - 1.0) * cap])
    bounds = [(0.0, 1.0 if g > 0 else 0.0) for g in gain]
    res = linprog(-gain, A_ub=rows, b_ub=limits, bounds=bounds, method="highs")
    if res.status != 0:
        return {}
    x = res.x[: n * k].reshape(n, k) + res.x[n * k :].reshape(n, k)
    best = np.argmax(x, axis=1)
    return {job.id: types[best[i]] for i, job in enumerate(chosen) if x[i, best[i]] > 1e-6}


def _in_reach(jobs: Sequence[Job], room: float) -> list[Job]:
    """The first jobs whose GPUs add up to ``room`` (the one that crosses it included)."""
    out, need = [], 0
    for job in jobs[:MAX_JOBS]:
        if need >= room:
            break
        out.append(job)
        need += max(1, job.spec.gpus)
    return out


def _solo(
    jobs: Sequence[Job], types: Sequence[str], model: InterferenceModel, here: Mapping[str, str]
) -> F64:
    """Per job and type: its solo speed over its best (0: not accepted or cannot run)."""
    eff = np.zeros((len(jobs), len(types)))
    for i, job in enumerate(jobs):
        sig, g = model.signature(job.spec), max(1, job.spec.gpus)
        eff[i] = [model.solo_throughput(sig, g, t) or 0.0 if job.spec.accepts_type(t) else 0.0 for t in types]
        top = eff[i].max()
        if top > 0:
            eff[i] /= top
        at = here.get(job.id)
        if at in types:
            eff[i, types.index(at)] *= STAY
    return eff


def _pair_speeds(jobs: Sequence[Job], types: Sequence[str], model: InterferenceModel) -> F64:
    """Per job and type: its mean normalised speed sharing a GPU there with one of the others
    (0 for an exclusive job)."""
    sigs = [model.signature(j.spec) for j in jobs]
    count = Counter(sigs)
    kinds = sorted(count)
    weight = np.array([count[s] for s in kinds], dtype=np.float64)
    mean = np.ones((len(kinds), len(types)))
    for c, t in enumerate(types):
        speed = np.array([[model.pair_speeds(a, b, t)[0] for b in kinds] for a in kinds])
        mean[:, c] = speed @ weight / weight.sum()
    at = {s: i for i, s in enumerate(kinds)}
    out = mean[[at[s] for s in sigs]]
    out[[j.spec.exclusive for j in jobs]] = 0.0  # (a job that never shares)
    return out
