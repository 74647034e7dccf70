"""The ``makespan`` objective of ``horus`` (``--objective makespan``): finish the whole queue
soonest, at little cost in average completion time.

The queue cannot end before the *horizon* H: the work left (pending jobs' lengths x GPUs, plus
the confidently estimated work left of running jobs) spread over the cluster's GPUs. A job whose
length is at least ``CRITICAL`` x H would end the queue late if it started late: such *critical*
jobs are served first, longest first (LPT, the classic makespan rule), the rest shortest first
(what keeps average JCT low). As the queue drains H shrinks, so longer jobs become critical in
turn and start while there is time to finish them. ``CRITICAL`` below 1 leaves room for what H
does not count: sharing and gang placement run below solo speed, and running jobs of unknown
length count for nothing.

A job's length is its remaining run time alone: its confident remaining work from progress
reports (:mod:`.remaining`) where there is one, else its total steps at its solo speed on the
cluster's main GPU type, else unknown (critical, and first: an unknown job may be the long one).

The starvation bound: a job that has waited ``AGING`` times its length is critical too, and a
critical job ranks by the larger of its length and its wait / ``AGING`` (ties: longer first, so
a batch, where every job has waited as long, keeps the LPT order). A waiting job is so passed
only by jobs longer than its wait / ``AGING``: none waits much more than ``AGING`` x the longest
length queued. Higher priority still goes first. There is no least-attained-service preemption
(stopping a long job for a short one is what a makespan objective must not do); the look-ahead
of 5 (a big gang is not passed forever), the gang reservation, the co-location rule and the
speed floors stay ``horus``'s.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray

from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.horus import HORUS
from horus_core.policies.order import by_keys, solo_seconds
from horus_core.policies.pack import PackingPolicy
from horus_core.policies.packing_config import Ix

OBJECTIVES = ("jct", "makespan")
CRITICAL = 0.4  # a job is critical when its length is at least this share of the horizon
AGING = 2.0  # ... or when it has waited this many times its length


def by_horizon(policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float) -> Ix:
    """Higher priority; then critical jobs, longest (or longest waiting) first; then the rest,
    shortest first; then arrival, then id (module doc)."""
    length, running = lengths(policy, live, layout)
    gpus = live.p_gpus.astype(np.float64)
    known = np.isfinite(length)
    horizon = (float(np.dot(length[known], gpus[known])) + running) / max(layout.n_gpus, 1)
    waited = np.maximum(now - live.p_sub, 0.0)
    critical = ~known | (length >= CRITICAL * horizon) | (waited >= AGING * length)
    key = np.where(critical, -np.maximum(length, waited / AGING), length)
    then = np.where(critical, -length, length)
    return by_keys([-live.p_prio, (~critical).astype(np.int64), key, then, live.p_sub], live.p_ids)


def lengths(policy: PackingPolicy, live: Live, layout: ClusterLayout) -> tuple[NDArray[np.float64], float]:
    """Each pending job's remaining run time alone in seconds (inf: unknown), and the running
    jobs' confidently estimated GPU-seconds left (module doc)."""
    length = solo_seconds(live, layout, policy.model)
    las = policy.las
    if las is None or las.work is None or not las.left:
        return length, 0.0
    left = las.left_of(live.p_ids) / np.maximum(live.p_gpus, 1).astype(np.float64)
    running = las.left_of([job.id for job in live.active])
    return np.where(np.isfinite(left), left, length), float(running[np.isfinite(running)].sum())


HORUS_MAKESPAN = dataclasses.replace(HORUS, order=by_horizon, preempt=False)
