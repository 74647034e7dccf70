"""The worker's side of the protobuf edge (pure functions): its messages built from the
worker's own types, and the master's messages read into :mod:`horus_core.plane` types."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from horus_core import __version__, wire
from horus_core.gang import GangInfo
from horus_core.gen import types_pb2, worker_pb2
from horus_core.model import Gpu, SlurmTag, gpu_type_of
from horus_core.plane import Assignment, JobGpuReading, Kill, LeaseGrant, ToWorker
from horus_core.wire import gpu_to_pb, job_state_to_pb, slurm_tag_to_pb, spec_from_pb
from worker.gpu.base import GpuInfo, GpuReading, ProcessReading
from worker.runtime.base import AttemptKey
from worker.state import Update


@dataclass(frozen=True, slots=True)
class Progress:
    step: int
    loss: float = 0.0
    samples_per_s: float = 0.0
    at: float = 0.0


def refs(keys: Iterable[AttemptKey]) -> list[worker_pb2.AttemptRef]:
    return [worker_pb2.AttemptRef(job_id=k.job_id, attempt=k.attempt) for k in keys]


def register(
    name: str,
    gpus: Sequence[GpuInfo],
    running: Iterable[AttemptKey],
    token: str,
    finished: Iterable[Update] = (),
    resume_epoch: int = 0,
    advertise_addr: str = "",
    rack: str = "",
    runtime: str = "",
    slurm: SlurmTag | None = None,
) -> worker_pb2.WorkerMessage:
    pb_gpus = [gpu_to_pb(_gpu(name, g)) for g in gpus]
    msg = worker_pb2.Register(
        name=name,
        gpus=pb_gpus,
        running=refs(running),
        token=token,
        version=__version__,
        finished=[update(u).update for u in finished],
        resume_epoch=resume_epoch,
        advertise_addr=advertise_addr,
        rack=rack,
        runtime=runtime,
    )
    if slurm is not None:
        msg.slurm.CopyFrom(slurm_tag_to_pb(slurm))
    return worker_pb2.WorkerMessage(register=msg)


def drain_self(timeout_s: float, reason: str, end_time: float = 0.0) -> worker_pb2.WorkerMessage:
    """Ask the master to drain this node (a Slurm pilot warned of its end, docs/slurm.md)."""
    drain = worker_pb2.DrainSelf(timeout_s=timeout_s, reason=reason[:200], end_time=end_time)
    return worker_pb2.WorkerMessage(drain=drain)


def _gpu(node: str, g: GpuInfo) -> Gpu:
    kind = gpu_type_of(g.model)
    return Gpu(
        g.uuid, node, g.index, g.model, g.memory_mib, kind, True, "", g.compute_fraction, g.parent_uuid
    )


Outgoing = worker_pb2.WorkerMessage  # what the worker sends (built here, written by the connection)


def lease_grant(msg: worker_pb2.Registered) -> LeaseGrant:
    """The master's answer to a registration or a heartbeat."""
    return LeaseGrant(msg.heartbeat_interval_s, msg.lease_s, msg.epoch, msg.renews_seq, msg.kill_grace_s)


def from_master(msg: worker_pb2.MasterMessage) -> ToWorker | None:
    """One message of the master's stream (None: a kind this worker does not know)."""
    kind = msg.WhichOneof("msg")
    if kind == "registered":
        return lease_grant(msg.registered)
    if kind == "assign":
        a = msg.assign
        return Assignment(
            a.job_id, a.attempt, spec_from_pb(a.spec), tuple(a.gpus),
            a.node_rank, a.nnodes, a.world_size, a.master_addr, a.master_port,
            max(0, a.gpu_memory_cap_mib),
        )  # fmt: skip
    if kind == "kill":
        return Kill(msg.kill.job_id, msg.kill.attempt, msg.kill.reason)
    return None


def gang_env(a: Assignment) -> tuple[tuple[str, str], ...]:
    """The rendezvous env of a multi-node gang's part (none for a job on one node)."""
    if a.nnodes <= 1:
        return ()
    info = GangInfo(a.node_rank, a.nnodes, a.world_size, a.master_addr, a.master_port)
    return info.env(len(a.gpus))


def update(u: Update) -> worker_pb2.WorkerMessage:
    e = u.ending
    msg = worker_pb2.AttemptUpdate(
        job_id=u.key.job_id,
        attempt=u.key.attempt,
        state=job_state_to_pb(u.state),
        reason=u.reason,
        at=u.at,
        peak_gpu_memory_mib=e.peak_mib,
        cause=e.cause,
        shared=e.shared,
        neighbour_over_cap=e.neighbour_over,
    )
    if u.exit_code is not None:
        msg.exit_code = u.exit_code
    return worker_pb2.WorkerMessage(update=msg)


def log_chunk(key: AttemptKey, offset: int, data: bytes) -> worker_pb2.WorkerMessage:
    msg = worker_pb2.AttemptLog(job_id=key.job_id, attempt=key.attempt, offset=offset, data=data)
    return worker_pb2.WorkerMessage(log=msg)


def progress(key: AttemptKey, p: Progress) -> worker_pb2.WorkerMessage:
    msg = worker_pb2.AttemptProgress(
        job_id=key.job_id,
        attempt=key.attempt,
        step=p.step,
        loss=p.loss,
        samples_per_s=p.samples_per_s,
        at=p.at,
    )
    return worker_pb2.WorkerMessage(progress=msg)


def job_stats(
    procs: Iterable[ProcessReading], owner: Mapping[int, AttemptKey]
) -> list[types_pb2.JobGpuStats]:
    """Per-process readings summed per (attempt, GPU); processes of no attempt are left out."""
    sums: dict[tuple[AttemptKey, str], list[float]] = {}
    for p in procs:
        key = owner.get(p.pid)
        if key is None:
            continue
        acc = sums.setdefault((key, p.gpu_uuid), [0.0, 0.0])
        acc[0] += p.util_sm or 0.0
        acc[1] += p.mem_used_mib
    ordered = sorted(sums.items(), key=lambda kv: (kv[0][0].job_id, kv[0][0].attempt, kv[0][1]))
    return [
        wire.job_gpu_reading_to_pb(JobGpuReading(key.job_id, key.attempt, gpu, min(100.0, util), int(mem)))
        for (key, gpu), (util, mem) in ordered
    ]


def heartbeat(
    readings: Iterable[GpuReading],
    procs: Iterable[ProcessReading],
    owner: Mapping[int, AttemptKey],
    running: Iterable[AttemptKey],
    seq: int = 0,
    fenced: bool = False,
) -> worker_pb2.WorkerMessage:
    msg = worker_pb2.Heartbeat(
        gpus=[wire.gpu_reading_to_pb(r) for r in readings],
        jobs=job_stats(procs, owner),
        running=refs(running),
        seq=seq,
        fenced=fenced,
    )
    return worker_pb2.WorkerMessage(heartbeat=msg)
