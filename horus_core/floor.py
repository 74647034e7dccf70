"""Speed-floor enforcement after placement (issue 10), as pure decisions: which running job has
stayed below its floor long enough, and which co-runner to move for it.

A job's floor is sustained-broken when at least :data:`READINGS` consecutive measured speeds
(measured samples/s over its solo samples/s, 1.0 = solo) are all below its floor and the first
and last of them lie at least :data:`WINDOW_S` seconds apart; one reading at or above the floor
(or a new attempt) starts the count again. The
co-runner moved is the youngest other active job on any of its GPUs (latest ``started_at``,
then latest submission, then the larger id): the one that has lost the least work. The master
(``master/services/floor.py``) preempts it with :func:`move_reason`. docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from horus_core.model import Job

# The floor of a job that names none, in `horus-master` and `horus-sim` (issue 31): a job that
# shares a GPU keeps at least 0.7x of its solo speed. Chosen from the trade-off on Gavel's 2869ce
# trace (bench/floor_tradeoff.py, docs/sharing.md): +19 % average JCT on 16 V100 (the slowed
# jobs, mean speed below 0.8x, fall from 38 % to 9 %), +2 % on 24 K80 + 24 P100 + 24 V100.
# The Python APIs (MasterConfig, SimConfig) keep 0: code that embeds them states its floor.
DEFAULT_MIN_SPEED = 0.7
READINGS = 3  # consecutive readings below the floor ...
WINDOW_S = 60.0  # ... spanning at least this long


def effective_floor(job: Job, default: float) -> float:
    """The job's own floor, else the cluster default (0: none; a job's ``NO_FLOOR``: none)."""
    own = job.spec.min_speed
    if own < 0.0:
        return 0.0
    return own if own > 0.0 else default


@dataclass
class FloorWatch:
    """Per (job, attempt): its run of readings below its floor as [first time, last time, count]."""

    readings: int = READINGS
    window_s: float = WINDOW_S
    _low: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def observe(self, job: Job, at: float, speed: float, floor: float) -> bool:
        """Record one reading; True when the job's floor is now sustained-broken."""
        key = (job.id, job.attempt)
        if floor <= 0.0 or speed >= floor:
            self._low.pop(key, None)
            return False
        run = self._low.get(key)
        if run is None:
            run = self._low[key] = [at, at, 1.0]
        elif at > run[1]:  # (the same time again is not a new reading)
            run[1], run[2] = at, run[2] + 1.0
        return run[2] >= self.readings and run[1] - run[0] >= self.window_s

    def forget(self, keep: Iterable[tuple[str, int]]) -> None:
        """Drop the counts of attempts no longer running."""
        alive = set(keep)
        for key in [k for k in self._low if k not in alive]:
            del self._low[key]

    def reset(self, job: Job) -> None:
        self._low.pop((job.id, job.attempt), None)


def co_runner_to_move(job: Job, active: Sequence[Job]) -> Job | None:
    """The youngest other active job sharing one of ``job``'s GPUs, or None."""
    mine = set(job.gpus)
    others = [j for j in active if j.id != job.id and j.state.active and mine.intersection(j.gpus)]
    if not others:
        return None
    return max(others, key=lambda j: (j.started_at or 0.0, j.submitted_at, j.id))


def move_reason(slow: Job, speed: float, floor: float) -> str:
    return (
        f"moved: job {slow.id} sharing its GPU ran at {speed:.2f}x of solo, below its "
        f"speed floor {floor:g}x, for {READINGS} readings in a row"
    )


def settled(active: Sequence[Job], at: float, min_run_s: float) -> list[Job]:
    """The jobs whose attempt has run ``min_run_s`` seconds by ``at`` (may be moved)."""
    return [j for j in active if at - (at if j.started_at is None else j.started_at) >= min_run_s]


def decide_moves(
    watch: FloorWatch,
    active: Sequence[Job],
    speeds: Mapping[str, float],
    at: float,
    default: float,
    min_run_s: float = 0.0,
) -> list[tuple[Job, str]]:
    """Feed this round's measured speeds to ``watch``; the co-runners to move, with reasons (one
    per co-runner; a job whose co-runner is moved starts its count again). A co-runner that has
    not yet run ``min_run_s`` seconds (an attempt not yet RUNNING counts as just started) is not
    moved: the slow job keeps its count and is looked at again next round."""
    moves: dict[str, tuple[Job, str]] = {}
    movable = settled(active, at, min_run_s) if min_run_s > 0 else active
    watch.forget((j.id, j.attempt) for j in active)
    for job in active:
        speed = speeds.get(job.id)
        floor = effective_floor(job, default)
        if speed is None or not watch.observe(job, at, speed, floor):
            continue
        victim = co_runner_to_move(job, movable)
        if victim is not None and victim.id not in moves:
            moves[victim.id] = (victim, move_reason(job, speed, floor))
            watch.reset(job)
    return list(moves.values())
