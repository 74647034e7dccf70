"""Protobuf -> view converters that :mod:`horus_core.wire` does not (yet) provide."""

from __future__ import annotations

from typing import Any

from horus_core import wire
from horus_core.client._views import (
    ClusterInfo,
    GpuStatus,
    JobEvent,
    JobPage,
    JobProgress,
    LatencySummary,
    LogChunk,
    PairSpeed,
    Profile,
    ProgressReport,
    ServerStats,
)
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import JobState


def gpu_status_from_pb(msg: pb.GpuStatus) -> GpuStatus:
    gpu = wire.gpu_from_pb(msg.gpu)
    return GpuStatus(
        gpu=gpu,
        stats=wire.gpu_reading_from_pb(msg.stats, gpu.uuid),
        job_ids=tuple(msg.job_ids),
        jobs=tuple(wire.job_gpu_reading_from_pb(j) for j in msg.jobs),
    )


def job_event_from_pb(msg: pb.JobEvent) -> JobEvent:
    previous: JobState | None = None
    if msg.previous_state != pb.JOB_STATE_UNSPECIFIED:
        previous = wire.job_state_from_pb(msg.previous_state, "previous_state")
    return JobEvent(job=wire.job_from_pb(msg.job), previous_state=previous, at=msg.at, reason=msg.reason)


def profile_from_pb(msg: pb.Profile) -> Profile:
    return Profile(
        job_type=msg.job_type,
        util_avg=msg.util_avg,
        util_peak=msg.util_peak,
        mem_mib=msg.mem_mib,
        samples=msg.samples,
        co_speed=dict(msg.co_speed),
        solo_samples_per_s=dict(msg.solo_samples_per_s),
    )


def pair_speed_from_pb(msg: pb.PairSpeed) -> PairSpeed:
    return PairSpeed(
        job_type=msg.job_type,
        co_runner=msg.co_runner,
        gpu_type=msg.gpu_type,
        speed=msg.speed,
        samples=msg.samples,
        updated_at=msg.updated_at,
    )


def log_chunk_from_pb(msg: cpb.LogChunk) -> LogChunk:
    return LogChunk(job_id=msg.job_id, attempt=msg.attempt, offset=msg.offset, data=msg.data, node=msg.node)


def cluster_info_from_pb(msg: cpb.ClusterInfo) -> ClusterInfo:
    return ClusterInfo(
        version=msg.version,
        policy=msg.policy,
        max_gpus_per_node=msg.max_gpus_per_node,
        gpu_types=tuple(msg.gpu_types),
        job_types=tuple(msg.job_types),
    )


def latency_from_pb(msg: cpb.LatencySummary) -> LatencySummary:
    return LatencySummary(msg.samples, msg.total, msg.p50_ms, msg.p99_ms, msg.max_ms)


def server_stats_from_pb(msg: cpb.ServerStats) -> ServerStats:
    return ServerStats(
        loop_lag=latency_from_pb(msg.loop_lag),
        loop_interval_s=msg.loop_interval_s,
        heartbeat=latency_from_pb(msg.heartbeat),
        nodes=msg.nodes,
        nodes_connected=msg.nodes_connected,
    )


def job_page_from_pb(msg: cpb.ListJobsResponse) -> JobPage:
    return JobPage(jobs=tuple(wire.job_from_pb(j) for j in msg.jobs), next_page_token=msg.next_page_token)


def _opt(msg: Any, name: str) -> float | None:
    return float(getattr(msg, name)) if msg.HasField(name) else None


def progress_report_from_pb(msg: cpb.ProgressPoint) -> ProgressReport:
    return ProgressReport(msg.attempt, msg.step, _opt(msg, "loss"), msg.samples_per_s, msg.at)


def job_progress_from_pb(msg: cpb.JobProgressReport) -> JobProgress:
    b = (_opt(msg, "curve_b0"), _opt(msg, "curve_b1"), _opt(msg, "curve_b2"))
    return JobProgress(
        job_id=msg.job_id,
        latest=progress_report_from_pb(msg.latest) if msg.HasField("latest") else None,
        points=msg.points,
        estimate_from=msg.estimate_from,
        steps_left=_opt(msg, "steps_left"),
        seconds_left=_opt(msg, "seconds_left"),
        target_step=_opt(msg, "target_step"),
        curve=(b[0], b[1], b[2]) if b[0] is not None and b[1] is not None and b[2] is not None else None,
        history=tuple(progress_report_from_pb(p) for p in msg.history),
        measured_speed=_opt(msg, "measured_speed"),
    )
