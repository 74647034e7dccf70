"""Simulator options and what a run returns."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from horus_core.sim.scaling import NODE_FACTOR, RACK_FACTOR, check_factor
from horus_core.sim.state import JobRecord

# Work a job loses each time it is preempted (or migrated), in seconds at its solo speed on the
# GPU type it ran on: saving a checkpoint, restarting the process, reloading data and warming
# up. Gavel's simulator charges nothing; pass ``restart_cost_s=0`` to compare with it.
RESTART_COST_S = 30.0
# Gavel's round length; periodic rounds let time-sharing policies rotate jobs.
ROUND_S = 360.0
# After a round that preempted jobs, the next round comes this much later: the live master
# re-plans when the stopped attempt reports its end, and ticks every second.
POKE_S = 1.0
# A job "ran slow" below this fraction of its solo speed.
SLOW_THRESHOLD = 0.8


@dataclass(frozen=True, slots=True)
class SimConfig:
    """When the simulator calls ``policy.decide()`` and how it charges preemption.

    Rounds happen (1) at every time at which jobs arrive or complete (all events at one instant
    make one round), at most once per ``min_gap_s`` (later events wait for the next allowed
    instant), when ``event_rounds``; and (2) every ``round_s`` seconds of simulated time, on the
    multiples of ``round_s``, while at least one job is pending; (3) ``poke_s`` after a round
    that preempted jobs, as the master re-plans once a stopped attempt ends. ``idle_rounds=False`` skips
    event rounds with no pending job (exact for policies that only place queued jobs: fifo,
    binpack, horus, lucid; not for a policy that rearranges running jobs on its own).
    """

    round_s: float | None = ROUND_S
    event_rounds: bool = True
    min_gap_s: float = 0.0
    idle_rounds: bool = True
    restart_cost_s: float = RESTART_COST_S
    poke_s: float = POKE_S
    strict: bool = False  # raise on an action the master would drop, instead of dropping it
    slow_threshold: float = SLOW_THRESHOLD
    max_time_s: float | None = None  # stop the clock here (jobs still running stay unfinished)
    timeline: bool = True  # record cluster state at every event time (for plots)
    # Elastic jobs (sim/elastic.py): the seeded fraction of jobs made elastic, and whether the
    # specs policies see keep total_steps (False: only the loss curves tell the lengths).
    elastic: float = 0.0
    elastic_seed: int = 0
    elastic_known_steps: bool = True
    # Progress as live jobs report it (sim/elastic.py ``give_curves``): every job reports a loss on
    # a synthetic curve (``loss_curves``), and specs carry no total_steps (``hide_total_steps``).
    loss_curves: bool = False
    hide_total_steps: bool = False
    # Speed floor (issue 10) of every trace job, as the master's --min-speed default: 0 = none.
    min_speed: float = 0.0
    # Gangs over nodes (issue 11, sim/scaling.py): the share of its one-node rate a gang keeps
    # per extra node and per extra rack it spans.
    cross_node_factor: float = NODE_FACTOR
    cross_rack_factor: float = RACK_FACTOR

    def __post_init__(self) -> None:
        check_factor("cross_node_factor", self.cross_node_factor)
        check_factor("cross_rack_factor", self.cross_rack_factor)
        if self.round_s is not None and self.round_s <= 0:
            raise ValueError("round_s must be positive (or None for no periodic rounds)")
        if self.min_gap_s < 0 or self.restart_cost_s < 0 or self.poke_s <= 0:
            raise ValueError("min_gap_s and restart_cost_s must not be negative, poke_s must be positive")
        if not 0.0 <= self.min_speed <= 1.0:  # (NaN fails too)
            raise ValueError("min_speed must be a speed floor within [0, 1]")
        if not 0.0 <= self.elastic <= 1.0:
            raise ValueError("elastic must be a fraction within [0, 1]")
        if not self.event_rounds and self.round_s is None:
            raise ValueError("no rounds at all: enable event_rounds or set round_s")


@dataclass(slots=True)
class Timeline:
    """Cluster state after each event time: GPUs busy, useful work (sum of normalised speeds)."""

    t: array[float] = field(default_factory=lambda: array("d"))
    busy: array[float] = field(default_factory=lambda: array("d"))
    useful: array[float] = field(default_factory=lambda: array("d"))
    pending: array[float] = field(default_factory=lambda: array("d"))

    def add(self, t: float, busy: float, useful: float, pending: float) -> None:
        self.t.append(t)
        self.busy.append(busy)
        self.useful.append(useful)
        self.pending.append(pending)


@dataclass(frozen=True, slots=True)
class SimResult:
    policy: str
    gpus: int
    records: tuple[JobRecord, ...]
    start: float  # first arrival
    end: float  # last completion (or where the clock stopped)
    busy_gpu_s: float  # integral of busy GPUs over [start, end]
    useful_gpu_s: float  # integral of the sum of normalised speeds over [start, end]
    decide_s: tuple[float, ...]  # wall time of each decide() call
    counters: dict[str, int]
    timeline: Timeline
    warnings: tuple[str, ...] = ()
    wall_s: float = 0.0

    @property
    def unfinished(self) -> int:
        return sum(1 for r in self.records if r.finish is None)
