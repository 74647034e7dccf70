"""Protobuf views of in-memory state (nodes, GPU status, profiles)."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from horus_core import wire
from horus_core.gen import types_pb2 as pb
from horus_core.model import Job, Node
from master.services.nodes import NodeEntry
from master.store.learned import PairRow, SoloRow
from master.store.nodes import ProfileRow


class NodeViews:
    """``pb.Node`` of each node, converted again only when its GPUs or state changed (a node's
    ``last_seen`` moves with every heartbeat and is set in place): ListNodes with 1,000 nodes
    took ~30 ms of the master's loop converting, ~6 ms with this (bench/load.py). The messages
    returned are shared: callers copy them (assigning them to a response field does)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Node, pb.Node]] = {}

    def node(self, node: Node) -> pb.Node:
        hit = self._memo.get(node.name)
        if hit is None or hit[0].gpus is not node.gpus or hit[0].state is not node.state:
            msg = wire.node_to_pb(node)
            self._memo[node.name] = (node, msg)
            return msg
        msg = hit[1]
        msg.last_seen = node.last_seen
        return msg

    def nodes(self, nodes: Sequence[Node]) -> list[pb.Node]:
        if len(self._memo) > 2 * len(nodes) + 100:  # names no longer registered
            self._memo.clear()
        return [self.node(n) for n in nodes]


def gpu_statuses(
    nodes: Sequence[NodeEntry], active: Sequence[Job], visible: AbstractSet[str] | None = None
) -> list[pb.GpuStatus]:
    """Every GPU with its stats and jobs; ``visible``: the job ids the caller may see (None: all;
    a user is not shown other users' job ids, only the GPU's own figures)."""
    on_gpu: dict[str, list[str]] = {}
    caps: dict[tuple[str, int], int] = {}  # each attempt's GPU memory cap (docs/sharing.md)
    for job in active:
        caps[(job.id, job.attempt)] = job.gpu_memory_cap_mib
        if visible is None or job.id in visible:
            for uuid in job.gpus:
                on_gpu.setdefault(uuid, []).append(job.id)
    out: list[pb.GpuStatus] = []
    for entry in nodes:
        per_job: dict[str, list[pb.JobGpuStats]] = {}
        for s in entry.job_stats:
            if visible is None or s.job_id in visible:
                msg = wire.job_gpu_reading_to_pb(s)
                msg.cap_mib = caps.get((s.job_id, s.attempt), 0)
                per_job.setdefault(s.gpu_uuid, []).append(msg)
        for gpu in entry.model().gpus:
            reading = entry.gpu_stats.get(gpu.uuid)
            stats = wire.gpu_reading_to_pb(reading) if reading is not None else pb.GpuStats(uuid=gpu.uuid)
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


def pair_to_pb(p: PairRow) -> pb.PairSpeed:
    return pb.PairSpeed(
        job_type=p.job_type,
        co_runner=p.co_runner,
        gpu_type=p.gpu_type,
        speed=p.speed,
        samples=p.samples,
        updated_at=p.updated_at,
    )


def learned_profiles(
    profiles: Sequence[ProfileRow], solos: Sequence[SoloRow], pairs: Sequence[PairRow]
) -> list[pb.Profile]:
    """One Profile per signature anything was learned about: its GPU use, its solo throughputs,
    and (``co_speed``) each co-runner's measured speed on the GPU type measured most often."""
    out = {p.job_type: profile_to_pb(p) for p in profiles}

    def get(sig: str) -> pb.Profile:
        msg = out.get(sig)
        if msg is None:
            msg = out[sig] = pb.Profile(job_type=sig)
        return msg

    for s in solos:
        get(s.job_type).solo_samples_per_s[f"{s.gpu_type}x{s.gpus}"] = s.samples_per_s
    best: dict[tuple[str, str], PairRow] = {}
    for pair in pairs:
        key = (pair.job_type, pair.co_runner)
        old = best.get(key)
        if old is None or (pair.samples, pair.updated_at) > (old.samples, old.updated_at):
            best[key] = pair
    for (sig, other), pair in best.items():
        get(sig).co_speed[other] = pair.speed
    return [out[k] for k in sorted(out)]
