"""The row ``hctl queues`` and the SDK show per queue; kept apart from the queue logic so the
client layers import it without the scheduler's numerical stack (numba, SciPy)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
