"""How fast a job runs: measured solo throughput x normalised speed next to its co-runners.

The simulator needs three things of an interference model; :class:`RateModel` names them so any
object with these methods works (``horus_core.interference.InterferenceModel`` in production, a
small fake in tests). :class:`RateCache` memoises the answers, because a run asks the same
questions hundreds of thousands of times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from horus_core.errors import HorusError
from horus_core.model import JobSpec


class SimulationError(HorusError):
    """The simulation cannot go on: a policy returned an impossible action, or a model failed."""


class RateModel(Protocol):
    def signature(self, spec: JobSpec) -> str: ...

    def solo_throughput(self, job_type: str, gpus: int, gpu_type: str) -> float | None: ...

    def co_speeds(self, signatures: Sequence[str], gpu_type: str) -> tuple[float, ...]: ...


class RateCache:
    """Memoised :class:`RateModel` answers. Speeds are clamped to [0, 1.5]; solo to >= 0."""

    def __init__(self, model: RateModel) -> None:
        self.model = model
        self._solo: dict[tuple[str, int, str], float | None] = {}
        self._co: dict[tuple[tuple[str, ...], str], tuple[float, ...]] = {}

    def solo(self, job_type: str, gpus: int, gpu_type: str) -> float | None:
        """Measured steps/s running alone; None where the table has no (positive) value."""
        key = (job_type, gpus, gpu_type)
        if key not in self._solo:
            value = self.model.solo_throughput(job_type, gpus, gpu_type)
            self._solo[key] = value if value is not None and value > 0 else None
        return self._solo[key]

    def co(self, signatures: tuple[str, ...], gpu_type: str) -> tuple[float, ...]:
        """Normalised speed (1.0 = solo) of each of the jobs sharing one GPU, in the given order."""
        if len(signatures) == 1:
            return (1.0,)
        key = (signatures, gpu_type)
        cached = self._co.get(key)
        if cached is None:
            try:
                raw = self.model.co_speeds(signatures, gpu_type)
            except (KeyError, ValueError) as exc:
                where = f"{list(signatures)} on {gpu_type}"
                raise SimulationError(f"interference model failed for {where}: {exc}") from None
            if len(raw) != len(signatures):
                raise SimulationError(
                    f"co_speeds returned {len(raw)} speeds for {len(signatures)} jobs on {gpu_type}"
                )
            cached = tuple(min(max(float(s), 0.0), 1.5) for s in raw)
            self._co[key] = cached
        return cached
