"""The worker plane's messages as model types: GPU readings, heartbeats, attempt updates and
progress going up, assignments, kills and lease grants coming down (the wire forms are in
:mod:`horus_core.wire`; the services, the learner, the worker's probes and the SDK see only these)."""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.model import JobSpec, JobState

AttemptKey = tuple[str, int]  # (job id, attempt)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """Live readings of one GPU (NVML or the simulated probe)."""

    uuid: str
    util_sm: float = 0.0  # %
    util_mem: float = 0.0  # %
    mem_used_mib: int = 0
    mem_total_mib: int = 0
    temperature_c: float = 0.0
    power_w: float = 0.0
    ecc_errors: int = 0
    xid_events: tuple[int, ...] = ()
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class JobGpuReading:
    """What one attempt of one job uses on one GPU."""

    job_id: str
    attempt: int
    gpu_uuid: str
    util_sm: float = 0.0
    mem_used_mib: int = 0
    cap_mib: int = 0  # the attempt's GPU memory cap (0: none), as the master's views fill it in


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A worker's periodic report: its GPUs, what each attempt uses, and what it runs."""

    gpus: tuple[GpuReading, ...] = ()
    jobs: tuple[JobGpuReading, ...] = ()
    running: tuple[AttemptKey, ...] = ()
    seq: int = 0  # increases per heartbeat of a stream; the lease renewal names it
    fenced: bool = False  # the worker's lease ran out: it refuses assignments


@dataclass(frozen=True, slots=True)
class AttemptUpdate:
    """A state change of one attempt; idempotent on (job_id, attempt, state)."""

    job_id: str
    attempt: int
    state: JobState
    exit_code: int | None = None
    reason: str = ""
    at: float = 0.0
    # A final update's sharing facts (docs/sharing.md): the peak GPU memory on any one GPU (MiB,
    # 0 = unknown), the cause where the worker knows one (horus_core.containment: CAUSE_*), and
    # whether another attempt shared one of its GPUs while it ran, and whether one of those was
    # seen above its cap meanwhile.
    peak_gpu_memory_mib: int = 0
    cause: str = ""
    shared: bool = False
    neighbour_over_cap: bool = False


@dataclass(frozen=True, slots=True)
class AttemptLog:
    """Output of an attempt; idempotent on (job_id, attempt, offset)."""

    job_id: str
    attempt: int
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class AttemptProgress:
    """Progress reported by the job through the SDK helper."""

    job_id: str
    attempt: int
    step: int = 0
    loss: float = 0.0
    samples_per_s: float = 0.0
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """The master's answer to a registration (``epoch``) or a heartbeat (``renews_seq``)."""

    heartbeat_interval_s: float
    lease_s: float
    epoch: int = 0
    renews_seq: int = 0
    kill_grace_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Assignment:
    """Run attempt ``attempt`` of ``job_id`` with ``spec`` on the worker's GPUs ``gpus``."""

    job_id: str
    attempt: int
    spec: JobSpec
    gpus: tuple[str, ...]
    # A part of a multi-node gang (issue 11): its rank, the gang's nodes and GPUs, and where the
    # rank-0 node's rendezvous listens; nnodes 0: a job on one node.
    node_rank: int = 0
    nnodes: int = 0
    world_size: int = 0
    master_addr: str = ""
    master_port: int = 0
    gpu_memory_cap_mib: int = 0  # the attempt's GPU memory cap per GPU (0: none), docs/sharing.md


@dataclass(frozen=True, slots=True)
class Kill:
    job_id: str
    attempt: int
    reason: str = ""


# What the master sends down one worker stream.
ToWorker = LeaseGrant | Assignment | Kill
