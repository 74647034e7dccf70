"""``squeue --json`` read into :class:`SlurmJob` (the fields the pilots need).

Slurm 22.05 prints plain numbers and a state string; 23.02 and later wrap numbers as
``{"set": true, "infinite": false, "number": N}`` and states as lists: both are read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: str
    name: str
    state: str  # PENDING, RUNNING, COMPLETING, CANCELLED, TIMEOUT, ...
    end_time: float  # unix seconds; 0 = not known (pending, no limit)
    start_time: float
    nodes: str  # the node list ("" while pending)
    reason: str  # why it waits ("None" when it does not)
    partition: str = ""

    @property
    def active(self) -> bool:
        """Pending or running: the job still holds (or will hold) an allocation."""
        return self.state in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED")

    def left_s(self, now: float) -> float | None:
        """Seconds until Slurm ends it; None while unknown."""
        return max(0.0, self.end_time - now) if self.end_time > 0 and self.state == "RUNNING" else None


def parse_squeue(text: str) -> list[SlurmJob]:
    """The jobs in ``squeue --json``'s output; ValueError when it is not that."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"squeue --json printed no JSON: {exc}") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ValueError("squeue --json printed no 'jobs' list")
    return [_job(j) for j in jobs if isinstance(j, dict)]


def _job(j: dict[str, Any]) -> SlurmJob:
    return SlurmJob(
        job_id=str(_number(j.get("job_id"))),
        name=str(j.get("name", "")),
        state=_state(j.get("job_state")),
        end_time=float(_number(j.get("end_time"))),
        start_time=float(_number(j.get("start_time"))),
        nodes=str(j.get("nodes", "")),
        reason=str(j.get("state_reason", "")),
        partition=str(j.get("partition", "")),
    )


def _number(v: object) -> int:
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite", False):
            return 0
        v = v.get("number", 0)
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0


def _state(v: object) -> str:
    if isinstance(v, list):
        v = v[0] if v else ""
    return str(v or "UNKNOWN")
