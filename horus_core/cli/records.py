"""Model objects -> plain JSON-able dicts for ``-o json``.

These spellings are a contract that automation relies on; add keys, never rename them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from horus_core.client import GpuStatus, JobEvent, JobGpuStats, PairSpeed, Profile
from horus_core.model import Gpu, Job, Node
from horus_core.modelcard import card_to_dict

Record = dict[str, Any]


def job_parts(job: Job, node_of: Mapping[str, str] | None = None) -> list[tuple[str, list[str]]]:
    """Each node of the job's current/last attempt with its GPUs, in rank order. A gang's GPUs
    are split with ``node_of`` (GPU uuid -> node, from ListGpus); a GPU it does not know goes by
    its position (the GPUs are listed node by node)."""
    if not job.nodes:
        return [(job.node, list(job.gpus))] if job.node else []
    known = node_of or {}
    out: dict[str, list[str]] = {n: [] for n in job.nodes}
    for i, uuid in enumerate(job.gpus):
        node = known.get(uuid, "")
        out[node if node in out else job.nodes[i * len(job.nodes) // len(job.gpus)]].append(uuid)
    return list(out.items())


def job_record(job: Job, node_of: Mapping[str, str] | None = None) -> Record:
    spec = job.spec
    return {
        "id": job.id,
        "name": spec.name,
        "owner": spec.owner,
        "type": spec.job_type,
        "state": job.state.value,
        "attempt": job.attempt,
        "node": job.node,
        "gpus": list(job.gpus),  # GPU UUIDs of the current/last attempt
        "gpus_requested": spec.gpus,
        "gpus_min": spec.gpus_min,  # elastic range; both 0: not elastic
        "gpus_max": spec.gpus_max,
        # every node of the current/last attempt (several for a multi-node gang), in rank order
        "nodes": [{"name": n, "gpus": g} for n, g in job_parts(job, node_of)],
        "gpus_per_node": spec.gpus_per_node,
        "nodes_requested": spec.nodes,
        "exclusive": spec.exclusive,
        "priority": spec.priority,
        "min_speed": spec.min_speed,
        "gpu_memory_mib": spec.gpu_memory_mib,  # declared cap per GPU (0: not declared)
        "gpu_memory_cap_mib": job.gpu_memory_cap_mib,  # the current/last attempt's cap (0: none)
        "gpu_memory_peak_mib": job.gpu_memory_peak_mib,  # measured peak of the last attempt that ended
        "contained_mib": job.contained_mib,  # > 0: runs alone with this cap since it went over
        "gpu_types": list(spec.gpu_types),
        "queue": spec.queue or job.queue_name or None,  # the spec's, else where positions count it
        "priority_class": spec.priority_class,
        "grace_s": spec.grace_s,
        "reason": job.reason,
        "reason_code": job.reason_code,
        "position": job.queue_position or None,  # pending: place in its queue (1 = next)
        "predicted_slowdown": job.predicted_slowdown,  # a speed: 1.0 = as fast as alone
        "last_preempted_at": job.last_preempted_at,
        "last_preemption": job.last_preemption,
        "submitted_at": job.submitted_at,
        "updated_at": job.updated_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "exit_code": job.exit_code,
        "command": list(spec.command),
        "image": spec.image,
        "hints": {
            "util_avg": spec.hints.util_avg,
            "util_peak": spec.hints.util_peak,
            "mem_mib": spec.hints.mem_mib,
        },
        "model_card": None if spec.model_card is None else card_to_dict(spec.model_card),
    }


def gpu_record(gpu: Gpu) -> Record:
    return {
        "uuid": gpu.uuid,
        "index": gpu.index,
        "model": gpu.model,
        "memory_mib": gpu.memory_mib,
        "gpu_type": gpu.gpu_type,
        "healthy": gpu.healthy,
        "quarantine": gpu.quarantine,  # why the master quarantined it; "" = not quarantined
        "compute_fraction": gpu.compute_fraction,  # a MIG instance's share of its GPU (1.0: whole)
        "parent_uuid": gpu.parent_uuid,  # a MIG instance's physical GPU ("" for a whole GPU)
    }


def node_record(node: Node) -> Record:
    return {
        "name": node.name,
        "state": node.state.value,
        "last_seen": node.last_seen,
        "rack": node.rack,
        "drain_deadline": node.drain_deadline,
        "slurm": None
        if node.slurm is None
        else {"job_id": node.slurm.job_id, "end_time": node.slurm.end_time},
        "quarantined": sum(1 for g in node.gpus if g.quarantine),
        "gpus": [gpu_record(g) for g in sorted(node.gpus, key=lambda g: g.index)],
    }


def job_gpu_stats_record(stats: JobGpuStats) -> Record:
    return {
        "job_id": stats.job_id,
        "attempt": stats.attempt,
        "gpu_uuid": stats.gpu_uuid,
        "util_sm": stats.util_sm,
        "mem_used_mib": stats.mem_used_mib,
        "cap_mib": stats.cap_mib,
    }


def gpu_status_record(status: GpuStatus) -> Record:
    s = status.stats
    return {
        **gpu_record(status.gpu),
        "node": status.gpu.node,
        "util_sm": s.util_sm,
        "util_mem": s.util_mem,
        "mem_used_mib": s.mem_used_mib,
        "mem_total_mib": s.mem_total_mib,
        "temperature_c": s.temperature_c,
        "power_w": s.power_w,
        "ecc_errors": s.ecc_errors,
        "xid_events": list(s.xid_events),
        "stats_healthy": s.healthy,
        "job_ids": list(status.job_ids),
        "jobs": [job_gpu_stats_record(j) for j in status.jobs],
    }


def event_record(event: JobEvent) -> Record:
    return {
        "at": event.at,
        "previous_state": event.previous_state.value if event.previous_state else None,
        "state": event.job.state.value,
        "reason": event.reason,
        "job": job_record(event.job),
    }


def pair_speed_record(pair: PairSpeed) -> Record:
    return {
        "job_type": pair.job_type,
        "co_runner": pair.co_runner,
        "gpu_type": pair.gpu_type,
        "speed": pair.speed,
        "samples": pair.samples,
        "updated_at": pair.updated_at,
    }


def profile_record(profile: Profile, pairs: Sequence[PairSpeed] = ()) -> Record:
    """``pairs``: the measured pair speeds of this job type (``job_type`` equal to the profile's)."""
    return {
        "job_type": profile.job_type,
        "util_avg": profile.util_avg,
        "util_peak": profile.util_peak,
        "mem_mib": profile.mem_mib,
        "samples": profile.samples,
        "co_speed": dict(profile.co_speed),
        "solo_samples_per_s": dict(profile.solo_samples_per_s),
        "pairs": [pair_speed_record(p) for p in pairs],
    }
