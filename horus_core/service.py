"""Pure rules for nodes and GPUs out of service: which GPU readings quarantine a GPU, and which
jobs a drain preempts when (docs/nodes.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from horus_core.errors import InvalidArgument
from horus_core.model import Job, Preempt

# Xids an application causes itself (illegal memory access, a kernel's exception, a GPU-side
# assert, a stopped context, a video-engine error): they say nothing about the hardware, so they
# do not quarantine. Every other Xid does (e.g. 48 double-bit ECC, 63/64 row remapping, 79
# fallen off the bus, 94/95 contained/uncontained ECC, 119/120 GSP errors).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})
MAX_DRAIN_TIMEOUT_S = 30 * 24 * 3600.0


def gpu_fault(ecc_errors: int, xid_events: Iterable[int], ecc_seen: int) -> str:
    """Why a GPU reading quarantines its GPU ("" = it does not). ``ecc_seen``: the ECC count when
    the GPU was last released (the counter is cumulative: only new errors count)."""
    xids = sorted({int(x) for x in xid_events} - APPLICATION_XIDS)
    if xids:
        return "Xid " + ", ".join(str(x) for x in xids)
    if ecc_errors > ecc_seen:
        return f"{ecc_errors - ecc_seen} new uncorrected ECC error(s)"
    return ""


def drain_deadline(now: float, timeout_s: float | None) -> float:
    """When a drain started at ``now`` preempts what still runs (``None``: at once)."""
    if timeout_s is None:
        return now
    if not math.isfinite(timeout_s) or not 0 <= timeout_s <= MAX_DRAIN_TIMEOUT_S:
        raise InvalidArgument(
            "timeout_s", f"expected 0 to {MAX_DRAIN_TIMEOUT_S:g} seconds, got {timeout_s!r}"
        )
    return now + timeout_s


def drain_preempts(deadlines: Mapping[str, float], jobs: Iterable[Job], now: float) -> list[Preempt]:
    """A Preempt for every active job on a draining node whose deadline has passed."""
    out = []
    for job in jobs:
        deadline = deadlines.get(job.node)
        if job.state.active and deadline is not None and now >= deadline:
            out.append(Preempt(job.id, f"node {job.node} is drained"))
    return out
