"""The row ``hctl queues`` and the SDK show per queue; kept apart from the queue logic so the
client layers import it without the scheduler's numerical stack (numba, SciPy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ANY_TYPE = "*"  # a quota of any GPU type (as horus_core.queues.config names it)


@dataclass(frozen=True, slots=True)
class QueueUsage:
    name: str
    nominal: Mapping[str, int] = field(default_factory=dict)  # GPU type (or "*") -> quota
    borrowing_limit: int = 0
    used: int = 0  # GPUs its active jobs hold
    borrowed: int = 0  # of those, beyond its nominal quota
    running: int = 0  # active jobs
    pending: int = 0  # pending jobs
    pending_gpus: int = 0  # GPUs they ask for

    @property
    def nominal_total(self) -> int:
        return sum(self.nominal.values())


def quota_warnings(rows: Sequence[QueueUsage], gpus: Mapping[str, int]) -> list[str]:
    """Quotas the cluster cannot honour at once (``gpus``: GPU type -> GPUs of that type): the
    queues' quotas of one type add up to more GPUs of it than there are, or all quotas together
    to more than all GPUs. Reclaim then cannot give every queue its quota."""
    out = []
    for t in sorted({t for r in rows for t in r.nominal} - {ANY_TYPE}):
        want = {r.name: r.nominal[t] for r in rows if r.nominal.get(t, 0) > 0}
        if sum(want.values()) > gpus.get(t, 0):
            out.append(f"the queues' quotas of {t} GPUs add up to {sum(want.values())} ({_by(want)}); "
                       f"the cluster has {gpus.get(t, 0)}")  # fmt: skip
    total = {r.name: r.nominal_total for r in rows if r.nominal_total > 0}
    if sum(total.values()) > sum(gpus.values()):
        out.append(f"the queues' quotas add up to {sum(total.values())} GPUs ({_by(total)}); "
                   f"the cluster has {sum(gpus.values())}")  # fmt: skip
    return out


def _by(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{q} {n}" for q, n in counts.items())
