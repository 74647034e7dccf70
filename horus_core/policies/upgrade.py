"""Moves of running jobs to GPUs a pass leaves free: the second half of heterogeneity-aware
placement (a job placed on a slower type, or sharing a GPU, while the GPUs it should have were
busy goes there when they free, instead of staying where it is to its end).

After every tier of a pass has been served, a running job is stopped when a node of the type
the allocation gives it (:mod:`.allocate`; without one: any of its fast types, within
``fast_ratio`` of its best speed) has as many GPUs left free as it needs, it would run there
alone at least ``gain`` times faster than it runs now (its solo speed where it is times its
speed among the jobs on its GPUs), and its attempt has run ``min_run_s``. The next pass places
it (pending, that type first) on the GPUs it was stopped for. The largest speed-ups move first;
each free GPU is promised once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Job, JobState, Preempt
from horus_core.policies.base import busy_gpu_uuids
from horus_core.policies.views import View, placed_views

UPGRADE_GAIN = 1.1  # a move must make the job at least this much faster (its restart costs ~30 s of work)
MIN_RUN_S = 360.0  # an attempt runs this long before it may be moved


def upgrades(
    view: View,
    actions: Sequence[Action],
    model: InterferenceModel,
    fast_ratio: float,
    target: Mapping[str, str],
    gain: float = UPGRADE_GAIN,
    min_run_s: float = MIN_RUN_S,
) -> list[Preempt]:
    """The moves of the pass (see the module doc), given the actions its tiers chose."""
    state, now = view.state, view.state.now
    on_gpu, running = _after(view, actions, model)
    layout = view.layout
    nodes = np.repeat(layout.node_names, np.diff(layout.node_start)).tolist()
    free = Counter(  # (node, type) -> GPUs left free
        (n, t) for n, u, t in zip(nodes, layout.gpu_uuids, layout.types, strict=True) if u not in on_gpu
    )
    present = {t for _, t in free}
    moves: list[tuple[float, str, Job, str]] = []
    for job in running:
        if now - state.book.started_at(job, now) >= min_run_s:
            for t, ratio in _faster(job, on_gpu, present, view, model, fast_ratio, target.get(job.id)):
                if ratio >= gain:
                    moves.append((ratio, job.id, job, t))
    out: list[Preempt] = []
    moved: set[str] = set()
    for ratio, _, job, t in sorted(moves, key=lambda m: (-m[0], m[1])):
        need = max(1, job.spec.gpus)
        spot = next((nd for (nd, ty), k in sorted(free.items()) if ty == t and k >= need), None)
        if job.id in moved or spot is None:
            continue
        free[(spot, t)] -= need
        moved.add(job.id)
        here = state.types[job.gpus[0]]
        out.append(Preempt(job.id, f"moving to a free {t} GPU, {ratio:.1f}x its speed now on {here}"))
    return out


def _after(
    view: View, actions: Sequence[Action], model: InterferenceModel
) -> tuple[dict[str, list[str]], list[Job]]:
    """GPU -> the signatures of the jobs on it after ``actions``, and the jobs still running."""
    stopped = {a.job_id for a in actions if isinstance(a, Preempt)}
    kept = [j for j in view.active() if j.id not in stopped]
    jobs = [*kept, *placed_views(view.pending(), actions)]
    sig = {j.id: model.signature(j.spec) for j in jobs}
    on_gpu = {g: [sig[i] for i in ids] for g, ids in busy_gpu_uuids(jobs).items()}
    return on_gpu, [j for j in kept if j.state is JobState.RUNNING and j.gpus]


def _faster(
    job: Job,
    on_gpu: Mapping[str, list[str]],
    present: set[str],
    view: View,
    model: InterferenceModel,
    fast_ratio: float,
    want: str | None,
) -> list[tuple[str, float]]:
    """The types of ``present`` that ``job`` may move to, with how much faster it runs there
    alone than it runs now (none where it is where it should be, alone)."""
    types = view.state.types
    here = types[job.gpus[0]]
    if any(types[g] != here for g in job.gpus):
        return []
    sig, n = model.signature(job.spec), max(1, job.spec.gpus)
    solo = model.solo_throughput(sig, n, here)
    if not solo:
        return []
    shared = min(_speed_with(on_gpu.get(g, [sig]), sig, here, model) for g in job.gpus)
    now = solo * shared
    speed = {t: model.solo_throughput(sig, n, t) or 0.0 for t in view.present if job.spec.accepts_type(t)}
    best = max(speed.values(), default=0.0)
    if want is not None:
        ok = set() if want == here and shared >= 1.0 else {want}
    elif now >= fast_ratio * best and shared >= 1.0:
        ok = set()  # alone on one of its fast types
    else:
        ok = {t for t, s in speed.items() if s >= fast_ratio * best}
    return [(t, speed[t] / now) for t in sorted(present & ok) if now > 0]


def _speed_with(sigs: list[str], sig: str, gpu_type: str, model: InterferenceModel) -> float:
    """The normalised speed of the job ``sig`` among ``sigs`` (it included) on one GPU."""
    if len(sigs) < 2:
        return 1.0
    return model.co_speeds(sigs, gpu_type)[sigs.index(sig)]
