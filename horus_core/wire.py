"""Conversions between the model (frozen dataclasses) and the wire (protobuf), and the one
place where :class:`horus_core.errors.HorusError` maps to gRPC status codes and back."""

from __future__ import annotations

import math

import grpc

from horus_core import errors, plane
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import Gpu, Job, JobSpec, JobState, Node, NodeState, ProfileHints, SlurmTag
from horus_core.modelcard import card_to_json, parse_card
from horus_core.queueusage import QueueUsage

# ------------------------------------------------------------------------------------ enums

_JOB_STATE_TO_PB = {
    JobState.PENDING: pb.JOB_STATE_PENDING,
    JobState.ASSIGNED: pb.JOB_STATE_ASSIGNED,
    JobState.RUNNING: pb.JOB_STATE_RUNNING,
    JobState.SUCCEEDED: pb.JOB_STATE_SUCCEEDED,
    JobState.FAILED: pb.JOB_STATE_FAILED,
    JobState.CANCELLED: pb.JOB_STATE_CANCELLED,
}
_JOB_STATE_FROM_PB = {v: k for k, v in _JOB_STATE_TO_PB.items()}
_NODE_STATE_TO_PB = {
    NodeState.READY: pb.NODE_STATE_READY,
    NodeState.LOST: pb.NODE_STATE_LOST,
    NodeState.DRAINING: pb.NODE_STATE_DRAINING,
    NodeState.CORDONED: pb.NODE_STATE_CORDONED,
}
_NODE_STATE_FROM_PB = {v: k for k, v in _NODE_STATE_TO_PB.items()}


def job_state_to_pb(state: JobState) -> pb.JobState.ValueType:
    return _JOB_STATE_TO_PB[state]


def job_state_from_pb(value: int, field: str = "state") -> JobState:
    try:
        return _JOB_STATE_FROM_PB[value]  # type: ignore[index]
    except KeyError:
        raise errors.InvalidArgument(field, f"unknown job state value {value}") from None


def node_state_from_pb(value: int) -> NodeState:
    try:
        return _NODE_STATE_FROM_PB[value]  # type: ignore[index]
    except KeyError:
        raise errors.InvalidArgument("state", f"unknown node state value {value}") from None


# ------------------------------------------------------------------------------------- spec


def spec_to_pb(spec: JobSpec) -> pb.JobSpec:
    hints = pb.ProfileHints()
    if spec.hints.util_avg is not None:
        hints.util_avg = spec.hints.util_avg
    if spec.hints.util_peak is not None:
        hints.util_peak = spec.hints.util_peak
    if spec.hints.mem_mib is not None:
        hints.mem_mib = spec.hints.mem_mib
    return pb.JobSpec(
        command=list(spec.command),
        gpus=spec.gpus,
        name=spec.name,
        owner=spec.owner,
        job_type=spec.job_type,
        image=spec.image,
        env=[pb.EnvVar(key=k, value=v) for k, v in spec.env],
        workdir=spec.workdir,
        exclusive=spec.exclusive,
        priority=spec.priority,
        hints=hints,
        cpus=spec.cpus,
        memory_mib=spec.memory_mib,
        mounts=list(spec.mounts),
        total_steps=spec.total_steps,
        min_speed=spec.min_speed,
        gpu_types=list(spec.gpu_types),
        gpus_min=spec.gpus_min,
        gpus_max=spec.gpus_max,
        queue=spec.queue,
        priority_class=spec.priority_class,
        grace_s=spec.grace_s,
        gpus_per_node=spec.gpus_per_node,
        nodes=spec.nodes,
        model_card="" if spec.model_card is None else card_to_json(spec.model_card),
        gpu_memory_mib=spec.gpu_memory_mib,
    )


def spec_from_pb(msg: pb.JobSpec) -> JobSpec:
    """The spec of a message; a model card that is not a valid card raises InvalidArgument."""
    h = msg.hints
    return JobSpec(
        command=tuple(msg.command),
        gpus=msg.gpus,
        name=msg.name,
        owner=msg.owner,
        job_type=msg.job_type,
        image=msg.image,
        env=tuple((e.key, e.value) for e in msg.env),
        workdir=msg.workdir,
        exclusive=msg.exclusive,
        priority=msg.priority,
        hints=ProfileHints(
            util_avg=h.util_avg if h.HasField("util_avg") else None,
            util_peak=h.util_peak if h.HasField("util_peak") else None,
            mem_mib=h.mem_mib if h.HasField("mem_mib") else None,
        ),
        cpus=msg.cpus,
        memory_mib=msg.memory_mib,
        mounts=tuple(msg.mounts),
        total_steps=msg.total_steps,
        min_speed=msg.min_speed,
        gpu_types=tuple(msg.gpu_types),
        gpus_min=msg.gpus_min,
        gpus_max=msg.gpus_max,
        queue=msg.queue,
        priority_class=msg.priority_class,
        grace_s=msg.grace_s,
        gpus_per_node=msg.gpus_per_node,
        nodes=msg.nodes,
        model_card=parse_card(msg.model_card) if msg.model_card else None,
        gpu_memory_mib=msg.gpu_memory_mib,
    )


# -------------------------------------------------------------------------------------- job


def job_to_pb(job: Job) -> pb.Job:
    msg = pb.Job(
        id=job.id,
        spec=spec_to_pb(job.spec),
        state=job_state_to_pb(job.state),
        attempt=job.attempt,
        submitted_at=job.submitted_at,
        updated_at=job.updated_at,
        node=job.node,
        gpus=list(job.gpus),
        reason=job.reason,
        predicted_slowdown=job.predicted_slowdown,
        reason_code=job.reason_code,
        queue_position=job.queue_position,
        queue_name=job.queue_name,
        nodes=list(job.nodes),
        last_preempted_at=job.last_preempted_at or 0.0,
        last_preemption=job.last_preemption,
        gpu_memory_cap_mib=job.gpu_memory_cap_mib,
        gpu_memory_peak_mib=job.gpu_memory_peak_mib,
        contained_mib=job.contained_mib,
    )
    if job.started_at is not None:
        msg.started_at = job.started_at
    if job.finished_at is not None:
        msg.finished_at = job.finished_at
    if job.exit_code is not None:
        msg.exit_code = job.exit_code
    return msg


def job_from_pb(msg: pb.Job) -> Job:
    return Job(
        id=msg.id,
        spec=spec_from_pb(msg.spec),
        state=job_state_from_pb(msg.state),
        attempt=msg.attempt,
        submitted_at=msg.submitted_at,
        updated_at=msg.updated_at,
        started_at=msg.started_at if msg.HasField("started_at") else None,
        finished_at=msg.finished_at if msg.HasField("finished_at") else None,
        node=msg.node,
        gpus=tuple(msg.gpus),
        reason=msg.reason,
        exit_code=msg.exit_code if msg.HasField("exit_code") else None,
        predicted_slowdown=msg.predicted_slowdown,
        reason_code=msg.reason_code,
        queue_position=msg.queue_position,
        queue_name=msg.queue_name,
        nodes=tuple(msg.nodes),
        last_preempted_at=msg.last_preempted_at or None,
        last_preemption=msg.last_preemption,
        gpu_memory_cap_mib=msg.gpu_memory_cap_mib,
        gpu_memory_peak_mib=msg.gpu_memory_peak_mib,
        contained_mib=msg.contained_mib,
    )


# ---------------------------------------------------------------------------- nodes and GPUs


def gpu_to_pb(gpu: Gpu) -> pb.Gpu:
    return pb.Gpu(
        uuid=gpu.uuid,
        node=gpu.node,
        index=gpu.index,
        model=gpu.model,
        memory_mib=gpu.memory_mib,
        gpu_type=gpu.gpu_type,
        healthy=gpu.healthy,
        quarantine=gpu.quarantine,
        compute_fraction=gpu.compute_fraction,
        parent_uuid=gpu.parent_uuid,
    )


def gpu_from_pb(msg: pb.Gpu, node: str | None = None) -> Gpu:
    return Gpu(
        uuid=msg.uuid,
        node=node if node is not None else msg.node,
        index=msg.index,
        model=msg.model,
        memory_mib=msg.memory_mib,
        gpu_type=msg.gpu_type,
        healthy=msg.healthy,
        quarantine=msg.quarantine,
        compute_fraction=msg.compute_fraction if 0.0 < msg.compute_fraction <= 1.0 else 1.0,
        parent_uuid=msg.parent_uuid,
    )


def node_to_pb(node: Node) -> pb.Node:
    msg = pb.Node(
        name=node.name,
        state=_NODE_STATE_TO_PB[node.state],
        gpus=[gpu_to_pb(g) for g in node.gpus],
        last_seen=node.last_seen,
        rack=node.rack,
    )
    if node.drain_deadline is not None:
        msg.drain_deadline = node.drain_deadline
    if node.slurm is not None:
        msg.slurm.CopyFrom(slurm_tag_to_pb(node.slurm))
    return msg


def slurm_tag_to_pb(tag: SlurmTag) -> pb.SlurmTag:
    return pb.SlurmTag(job_id=tag.job_id, end_time=tag.end_time)


def slurm_tag_from_pb(msg: pb.SlurmTag) -> SlurmTag:
    end = msg.end_time if math.isfinite(msg.end_time) and msg.end_time > 0 else 0.0
    return SlurmTag(msg.job_id[:64], end)


def node_from_pb(msg: pb.Node) -> Node:
    return Node(
        name=msg.name,
        state=node_state_from_pb(msg.state),
        gpus=tuple(gpu_from_pb(g, msg.name) for g in msg.gpus),
        last_seen=msg.last_seen,
        rack=msg.rack,
        drain_deadline=msg.drain_deadline if msg.HasField("drain_deadline") else None,
        slurm=slurm_tag_from_pb(msg.slurm) if msg.HasField("slurm") else None,
    )


# ------------------------------------------------------------------- the worker plane's messages


def gpu_reading_to_pb(r: plane.GpuReading) -> pb.GpuStats:
    return pb.GpuStats(
        uuid=r.uuid,
        util_sm=r.util_sm,
        util_mem=r.util_mem,
        mem_used_mib=r.mem_used_mib,
        mem_total_mib=r.mem_total_mib,
        temperature_c=r.temperature_c,
        power_w=r.power_w,
        ecc_errors=r.ecc_errors,
        xid_events=list(r.xid_events),
        healthy=r.healthy,
    )


def gpu_reading_from_pb(msg: pb.GpuStats, uuid: str = "") -> plane.GpuReading:
    return plane.GpuReading(
        uuid=msg.uuid or uuid,
        util_sm=msg.util_sm,
        util_mem=msg.util_mem,
        mem_used_mib=msg.mem_used_mib,
        mem_total_mib=msg.mem_total_mib,
        temperature_c=msg.temperature_c,
        power_w=msg.power_w,
        ecc_errors=msg.ecc_errors,
        xid_events=tuple(msg.xid_events),
        healthy=msg.healthy,
    )


def job_gpu_reading_to_pb(r: plane.JobGpuReading) -> pb.JobGpuStats:
    return pb.JobGpuStats(
        job_id=r.job_id,
        attempt=r.attempt,
        gpu_uuid=r.gpu_uuid,
        util_sm=r.util_sm,
        mem_used_mib=r.mem_used_mib,
        cap_mib=r.cap_mib,
    )


def job_gpu_reading_from_pb(msg: pb.JobGpuStats) -> plane.JobGpuReading:
    return plane.JobGpuReading(
        msg.job_id, msg.attempt, msg.gpu_uuid, msg.util_sm, msg.mem_used_mib, max(0, msg.cap_mib)
    )


def heartbeat_from_pb(msg: wpb.Heartbeat) -> plane.Heartbeat:
    return plane.Heartbeat(
        gpus=tuple(gpu_reading_from_pb(g) for g in msg.gpus),
        jobs=tuple(job_gpu_reading_from_pb(j) for j in msg.jobs),
        running=tuple((r.job_id, r.attempt) for r in msg.running),
        seq=msg.seq,
        fenced=msg.fenced,
    )


def attempt_update_from_pb(msg: wpb.AttemptUpdate, field: str = "update.state") -> plane.AttemptUpdate:
    """Raises InvalidArgument for a state value this version does not know."""
    return plane.AttemptUpdate(
        job_id=msg.job_id,
        attempt=msg.attempt,
        state=job_state_from_pb(msg.state, field),
        exit_code=msg.exit_code if msg.HasField("exit_code") else None,
        reason=msg.reason,
        at=msg.at,
        peak_gpu_memory_mib=max(0, msg.peak_gpu_memory_mib),
        cause=msg.cause[:64],
        shared=msg.shared,
        neighbour_over_cap=msg.neighbour_over_cap,
    )


def attempt_progress_from_pb(msg: wpb.AttemptProgress) -> plane.AttemptProgress:
    return plane.AttemptProgress(msg.job_id, msg.attempt, msg.step, msg.loss, msg.samples_per_s, msg.at)


def attempt_log_from_pb(msg: wpb.AttemptLog) -> plane.AttemptLog:
    return plane.AttemptLog(msg.job_id, msg.attempt, msg.offset, msg.data)


def to_worker_pb(msg: plane.ToWorker) -> wpb.MasterMessage:
    """One message of the master's stream to a worker."""
    if isinstance(msg, plane.Assignment):
        assign = wpb.Assignment(
            job_id=msg.job_id,
            attempt=msg.attempt,
            spec=spec_to_pb(msg.spec),
            gpus=msg.gpus,
            node_rank=msg.node_rank,
            nnodes=msg.nnodes,
            world_size=msg.world_size,
            master_addr=msg.master_addr,
            master_port=msg.master_port,
            gpu_memory_cap_mib=msg.gpu_memory_cap_mib,
        )
        return wpb.MasterMessage(assign=assign)
    if isinstance(msg, plane.Kill):
        return wpb.MasterMessage(kill=wpb.Kill(job_id=msg.job_id, attempt=msg.attempt, reason=msg.reason))
    grant = wpb.Registered(
        heartbeat_interval_s=msg.heartbeat_interval_s,
        lease_s=msg.lease_s,
        epoch=msg.epoch,
        renews_seq=msg.renews_seq,
        kill_grace_s=msg.kill_grace_s,
    )
    return wpb.MasterMessage(registered=grant)


# ---------------------------------------------------------------------------- error mapping

_ERROR_CODES: tuple[tuple[type[errors.HorusError], grpc.StatusCode], ...] = (
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
)


def status_code_for(exc: errors.HorusError) -> grpc.StatusCode:
    for cls, code in _ERROR_CODES:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def error_from_status(code: grpc.StatusCode, details: str) -> errors.HorusError:
    """Turn a gRPC status received by a client back into the matching HorusError."""
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        field, _, message = details.partition(": ")
        return (
            errors.InvalidArgument(field, message) if message else errors.InvalidArgument("request", details)
        )
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return errors.Unavailable(details)
    for cls, known in _ERROR_CODES:
        if known is code:
            return cls(details)
    return errors.HorusError(f"{code.name}: {details}")


# ------------------------------------------------------------------------------ queues (issue 13)


def queue_usage_to_pb(row: QueueUsage) -> cpb.QueueUsageRow:
    return cpb.QueueUsageRow(
        name=row.name,
        nominal=[cpb.QueueQuota(gpu_type=t, gpus=n) for t, n in sorted(row.nominal.items())],
        borrowing_limit=row.borrowing_limit,
        used=row.used,
        borrowed=row.borrowed,
        running=row.running,
        pending=row.pending,
        pending_gpus=row.pending_gpus,
    )


def queue_usage_from_pb(msg: cpb.QueueUsageRow) -> QueueUsage:
    return QueueUsage(
        msg.name,
        {q.gpu_type: q.gpus for q in msg.nominal},
        msg.borrowing_limit,
        msg.used,
        msg.borrowed,
        msg.running,
        msg.pending,
        msg.pending_gpus,
    )
