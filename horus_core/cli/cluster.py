"""``hctl nodes``, ``hctl gpus``, ``hctl profiles`` and ``hctl info``."""

from __future__ import annotations

import argparse
import time

from horus_core.cli import output as fmt
from horus_core.cli import service
from horus_core.cli.base import Subparsers, add_command
from horus_core.cli.output import Output
from horus_core.cli.records import gpu_status_record, node_record, profile_record
from horus_core.client import GpuStatus, HorusClient, PairSpeed
from horus_core.model import Node


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    add_command(sub, "nodes", list_nodes, common, "list worker nodes and their GPUs")
    add_command(sub, "gpus", list_gpus, common, "list GPUs with live readings and the jobs on them")
    add_command(
        sub, "profiles", list_profiles, common, "what the master has learned: job profiles and pair speeds"
    )
    add_command(
        sub, "info", cluster_info, common,
        "master version, policy, largest node, and the GPU types and job types the cluster knows",
    )  # fmt: skip
    add_command(sub, "masters", list_masters, common, "each --master given: leader, standby or unreachable")
    service.register(sub, common)


async def list_nodes(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    nodes = sorted(await client.nodes(), key=lambda n: n.name)
    if out.json:
        out.dump([node_record(n) for n in nodes])
        return 0
    rows: list[tuple[str, ...]] = []
    for n in nodes:
        models = ", ".join(sorted({g.model for g in n.gpus})) or "-"
        healthy = sum(1 for g in n.gpus if g.healthy)
        held = service.quarantine_text(n)
        rack = n.rack or "-"
        state = service.state_text(n)
        rows.append((n.name, state, rack, f"{healthy}/{len(n.gpus)}", held, models, fmt.age(n.last_seen)))
    head: tuple[str, ...] = (
        "NAME",
        "STATE",
        "RACK",
        "GPUS (HEALTHY/ALL)",
        "QUARANTINED",
        "MODEL",
        "LAST SEEN",
    )
    if any(n.slurm is not None for n in nodes):  # Slurm pilots (docs/slurm.md): their job, time left
        head += ("SLURM JOB", "TIME LEFT")
        rows = [(*r, *slurm_text(n, time.time())) for r, n in zip(rows, nodes, strict=True)]
    out.table(head, rows)
    return 0


def slurm_text(node: Node, now: float) -> tuple[str, str]:
    """A pilot's Slurm job id and the time its job has left ("-", "-" for other nodes)."""
    tag = node.slurm
    if tag is None:
        return "-", "-"
    if tag.end_time <= 0:
        return tag.job_id, "unlimited"
    left = int(max(0.0, tag.end_time - now))
    return tag.job_id, f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"


async def list_gpus(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    statuses = sort_gpus(await client.gpus())
    if out.json:
        out.dump([gpu_status_record(s) for s in statuses])
        return 0
    out.table(
        ("NODE", "IDX", "UUID", "MODEL", "UTIL", "MEMORY", "TEMP", "HEALTH", "JOBS"),
        [gpu_row(s) for s in statuses],
    )
    return 0


def sort_gpus(statuses: list[GpuStatus]) -> list[GpuStatus]:
    return sorted(statuses, key=lambda s: (s.gpu.node, s.gpu.index))


def gpu_row(s: GpuStatus) -> tuple[object, ...]:
    total = s.stats.mem_total_mib or s.gpu.memory_mib
    healthy = s.gpu.healthy and s.stats.healthy
    return (
        s.gpu.node,
        s.gpu.index,
        s.gpu.uuid,
        s.gpu.model,
        fmt.pct(s.stats.util_sm),
        f"{fmt.mib(s.stats.mem_used_mib)}/{fmt.mib(total)}",
        f"{s.stats.temperature_c:.0f}C",
        f"QUARANTINED ({s.gpu.quarantine})" if s.gpu.quarantine else "ok" if healthy else "UNHEALTHY",
        ",".join(job_memory_text(job_id, s) for job_id in s.job_ids),
    )


def job_memory_text(job_id: str, s: GpuStatus) -> str:
    """``ID (use/cap)``: a job on a GPU with what it uses of its GPU memory cap there
    (docs/sharing.md; ``-`` where not measured yet or without a cap)."""
    use = next((u for u in s.jobs if u.job_id == job_id), None)
    if use is None:
        return job_id
    cap = fmt.mib(use.cap_mib) if use.cap_mib > 0 else "-"
    return f"{job_id} ({fmt.mib(use.mem_used_mib)}/{cap})"


async def list_profiles(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    profiles, pairs = await client.learned()
    profiles = sorted(profiles, key=lambda p: p.job_type)
    pairs = sorted(pairs, key=lambda p: (p.job_type, p.co_runner, p.gpu_type))
    if out.json:
        by_type: dict[str, list[PairSpeed]] = {}
        for pair in pairs:
            by_type.setdefault(pair.job_type, []).append(pair)
        out.dump([profile_record(p, by_type.get(p.job_type, [])) for p in profiles])
        return 0
    rows = [
        (
            p.job_type,
            fmt.pct(p.util_avg) if p.samples else "-",
            fmt.pct(p.util_peak) if p.samples else "-",
            fmt.mib(p.mem_mib) if p.samples else "-",
            p.samples,
            solo_text(p.solo_samples_per_s),
            len(p.co_speed),
        )
        for p in profiles
    ]
    out.table(
        ("JOB TYPE", "UTIL AVG", "UTIL PEAK", "MEMORY", "SAMPLES", "SOLO SAMPLES/S", "KNOWN PAIRS"), rows
    )
    if pairs:
        out.line()
        out.line("Measured pair speeds (1.00 = as fast as alone):")
        out.table(
            ("JOB TYPE", "SHARING WITH", "GPU TYPE", "SPEED", "SAMPLES", "UPDATED"),
            [
                (p.job_type, p.co_runner, p.gpu_type, f"{p.speed:.2f}", p.samples, fmt.age(p.updated_at))
                for p in pairs
            ],
        )
    return 0


def solo_text(solo: dict[str, float]) -> str:
    """``{"v100x1": 640.0}`` -> ``v100x1 640``."""
    return ", ".join(f"{k} {v:.4g}" for k, v in sorted(solo.items())) or "-"


async def list_masters(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    """``hctl --master a,b,c masters``: which one leads (docs/ha.md). Exit 1 when none does."""
    rows = await client.probe_masters()
    if out.json:
        out.dump([{"master": m, "role": role, "detail": detail} for m, role, detail in rows])
    else:
        out.table(("MASTER", "ROLE", "DETAIL"), rows)
    return 0 if any(role == "leader" for _, role, _ in rows) else 1


async def cluster_info(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    info = await client.cluster_info()
    record = {
        "master": client.target,
        "version": info.version,
        "policy": info.policy,
        "max_gpus_per_node": info.max_gpus_per_node,
        "gpu_types": list(info.gpu_types),
        "job_types": list(info.job_types),
    }
    if out.json:
        out.dump(record)
        return 0
    labels = ("Master", "Version", "Policy", "Largest node (GPUs)", "GPU types")
    values = (*list(record.values())[:4], ", ".join(info.gpu_types) or "(no node registered)")
    out.line(fmt.render_fields(zip(labels, values, strict=True)))
    out.line(f"Job types with a profile ({len(info.job_types)}; hctl submit --type NAME):")
    for name in info.job_types:
        out.line(f"  {name}")
    return 0
