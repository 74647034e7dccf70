"""The public API for writing a policy outside Horus (``docs/adding-a-policy.md``).

Everything a new policy needs, importable without a leading underscore:

- **a queue order** for the packing shell: :class:`Packing` (a configuration; ``HORUS`` and
  ``BINPACK`` are the shipped ones to start from) with an :data:`Order`, a function of
  (policy, live jobs, GPU layout, now) returning positions into ``live.pending``; build it from
  :func:`by_keys` over the pending jobs' columns (:class:`Live`: ``p_prio``, ``p_gpus``,
  ``p_sub``, ``p_util()``, ``p_ids``) or start from :func:`by_arrival`, :func:`by_utilisation`;
- **a placement rule**: subclass :class:`Placing` and write ``serve(view)``, the actions for the
  view's pending jobs (``view.pending()``); :func:`free_gpus` says what is free on each node,
  :func:`holders` who is on each GPU, :func:`place_exclusive` places as ``fifo`` does;
- **a preemption rule**: a ``serve`` that returns :class:`Preempt` actions too (first: the GPUs
  they free may be assigned in the same pass); :func:`running_for` says how long a job has run.

The orders' own module, :mod:`horus_core.policies.order`, is public too. :func:`register`
makes ``--policy`` / ``--policies`` find the policy.
"""

from __future__ import annotations

from horus_core.model import Action, Assign, ClusterSnapshot, Job, Preempt, Wait
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies import register
from horus_core.policies.base import arrival_order, busy_gpu_uuids
from horus_core.policies.binpack import BINPACK
from horus_core.policies.fifo import free_gpus, place_exclusive
from horus_core.policies.horus import HORUS
from horus_core.policies.order import arrival_positions, by_keys, las_positions, util_positions
from horus_core.policies.pack import PackingPolicy, factory
from horus_core.policies.packing_config import Order, Packing, by_arrival, by_service, by_utilisation
from horus_core.policies.stage import Serving, Tier
from horus_core.policies.staged import Placing, drive
from horus_core.policies.views import View

__all__ = [
    "BINPACK",
    "HORUS",
    "Action",
    "Assign",
    "ClusterLayout",
    "ClusterSnapshot",
    "Job",
    "Live",
    "Order",
    "Packing",
    "PackingPolicy",
    "Placing",
    "Preempt",
    "Serving",
    "Tier",
    "View",
    "Wait",
    "arrival_order",
    "arrival_positions",
    "by_arrival",
    "by_keys",
    "by_service",
    "by_utilisation",
    "drive",
    "factory",
    "free_gpus",
    "holders",
    "las_positions",
    "place_exclusive",
    "register",
    "running_for",
    "util_positions",
]


def holders(view: View) -> dict[str, list[str]]:
    """Who is on each GPU of ``view``: GPU uuid -> the ids of the active jobs on it."""
    return busy_gpu_uuids(view.snapshot.jobs)


def running_for(job: Job, now: float) -> float:
    """Seconds the running attempt of ``job`` has run at ``now`` (0: not started)."""
    return 0.0 if job.started_at is None or not job.state.active else max(0.0, now - job.started_at)
