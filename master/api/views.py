"""Protobuf views of in-memory state (GPU status, profiles)."""

from __future__ import annotations

from collections.abc import Sequence

from horus_core import wire
from horus_core.gen import types_pb2 as pb
from horus_core.model import Job
from master.services.nodes import NodeEntry
from master.store.nodes import ProfileRow


def gpu_statuses(nodes: Sequence[NodeEntry], active: Sequence[Job]) -> list[pb.GpuStatus]:
    on_gpu: dict[str, list[str]] = {}
    for job in active:
        for uuid in job.gpus:
            on_gpu.setdefault(uuid, []).append(job.id)
    out: list[pb.GpuStatus] = []
    for entry in nodes:
        per_job: dict[str, list[pb.JobGpuStats]] = {}
        for s in entry.job_stats:
            per_job.setdefault(s.gpu_uuid, []).append(s)
        for gpu in entry.model().gpus:
            stats = entry.gpu_stats.get(gpu.uuid) or pb.GpuStats(uuid=gpu.uuid)
            out.append(
                pb.GpuStatus(
                    gpu=wire.gpu_to_pb(gpu),
                    stats=stats,
                    job_ids=on_gpu.get(gpu.uuid, []),
                    jobs=per_job.get(gpu.uuid, []),
                )
            )
    return out


def profile_to_pb(p: ProfileRow) -> pb.Profile:
    return pb.Profile(
        job_type=p.job_type,
        util_avg=p.util_avg,
        util_peak=p.util_peak,
        mem_mib=p.mem_mib,
        samples=p.samples,
        co_speed=p.co_speed,
    )
