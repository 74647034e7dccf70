"""Read-only views returned by the SDK for the things the core model does not cover.

Jobs and nodes come back as :class:`horus_core.model.Job` and :class:`horus_core.model.Node`;
everything else the client plane returns (live GPU readings, job events, profiles, log chunks,
cluster info, a page of jobs) is one of the small frozen dataclasses below. None of them is a
protobuf message, so callers never depend on the generated code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core.model import Gpu, Job, JobState
from horus_core.plane import GpuReading, JobGpuReading

# The GPU readings are the model's own types (one shape from the probe to the SDK); the SDK's
# names stay.
GpuStats = GpuReading
JobGpuStats = JobGpuReading


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """A GPU as the cluster sees it now: identity, live readings and the attempts on it."""

    gpu: Gpu
    stats: GpuStats
    job_ids: tuple[str, ...] = ()
    jobs: tuple[JobGpuStats, ...] = ()


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One state change of a job; ``previous_state`` is None for a newly submitted job."""

    job: Job
    previous_state: JobState | None
    at: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Profile:
    """What the master has learned about a workload signature (``job_type``)."""

    job_type: str
    util_avg: float
    util_peak: float
    mem_mib: int
    samples: int
    co_speed: dict[str, float] = field(default_factory=dict)  # co-runner -> measured normalised speed
    solo_samples_per_s: dict[str, float] = field(default_factory=dict)  # "v100x1" -> samples/s alone


@dataclass(frozen=True, slots=True)
class PairSpeed:
    """One direction of a measured pair: ``job_type``'s speed next to ``co_runner`` (1.0 = as alone)."""

    job_type: str
    co_runner: str
    gpu_type: str
    speed: float
    samples: int
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class LogChunk:
    job_id: str
    attempt: int
    offset: int
    data: bytes
    node: str = ""  # a multi-node gang's part ("" for a job on one node); offsets count per part


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    version: str
    policy: str
    max_gpus_per_node: int
    gpu_types: tuple[str, ...] = ()  # of the registered nodes
    job_types: tuple[str, ...] = ()  # with a profile: the packaged table's and the learned ones


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Recent durations in milliseconds: ``samples`` in the window, ``total`` ever recorded."""

    samples: int
    total: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class ServerStats:
    """How responsive the master is (:meth:`HorusClient.server_stats`)."""

    loop_lag: LatencySummary  # how late a task sleeping ``loop_interval_s`` wakes up
    loop_interval_s: float
    heartbeat: LatencySummary  # a heartbeat read off its stream until handled
    nodes: int
    nodes_connected: int


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of :meth:`HorusClient.list_page`; ``next_page_token`` is empty on the last page."""

    jobs: tuple[Job, ...]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True)
class ProgressReport:
    """One progress report of a job as the master kept it (:meth:`HorusClient.progress`)."""

    attempt: int
    step: int
    loss: float | None  # None: the job reported none
    samples_per_s: float
    at: float  # unix seconds


@dataclass(frozen=True, slots=True)
class JobProgress:
    """A job's latest progress and what is left of it, estimated by the master from its kept
    reports (Optimus's loss-curve fit, or the spec's ``total_steps``); estimates are None until
    there is one. ``history`` holds the kept reports asked for, oldest first."""

    job_id: str
    latest: ProgressReport | None
    points: int  # reports kept in the master's bounded history
    estimate_from: str  # "total_steps", "loss curve" or "" (no estimate)
    steps_left: float | None
    seconds_left: float | None
    target_step: float | None
    curve: tuple[float, float, float] | None  # (b0, b1, b2) of l(k) = 1 / (b0*k + b1) + b2
    history: tuple[ProgressReport, ...] = ()
    measured_speed: float | None = None  # running: latest samples/s over learned solo (1.0 = alone)
