"""``hctl jobs``, ``hctl job ID``, ``hctl queue`` and ``hctl cancel ID``."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping

from horus_core import caps
from horus_core.cli import output as fmt
from horus_core.cli.base import ACTIVE_STATES, Subparsers, add_command, job_state
from horus_core.cli.output import Output
from horus_core.cli.progress import progress_fields, progress_record
from horus_core.cli.records import job_gpu_stats_record, job_parts, job_record
from horus_core.client import GpuStatus, HorusClient, JobGpuStats
from horus_core.gpurange import format_gpus, gpus_text
from horus_core.model import Job, JobSpec, JobState
from horus_core.modelcard import card_summary
from horus_core.reasoncodes import queue_listing

REASON_WIDTH = 70
TYPE_WIDTH = 32


RECENT_S = 300.0  # `hctl jobs` also lists the jobs that ended this recently (as squeue shows them)


def predicted_speed(job: Job) -> str:
    """The predicted normalised speed (1.00x = as fast as alone) of a job placed now or before
    (a pending job: "-", whatever its last attempt got)."""
    return f"{job.predicted_slowdown:.2f}x" if job.attempt > 0 and job.state is not JobState.PENDING else "-"


def node_text(job: Job) -> str:
    """Where the job runs or ran (a gang: every node, rank 0 first); "-" while it waits."""
    return "-" if job.state is JobState.PENDING else "+".join(job.nodes) or job.node or "-"


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = add_command(
        sub, "jobs", list_jobs, common,
        f"list jobs: pending and active ones, and those that ended in the last {RECENT_S / 60:g} minutes",
    )  # fmt: skip
    p.add_argument(
        "--state",
        dest="states",
        action="extend",
        nargs="+",
        type=job_state,
        metavar="STATE",
        help="only jobs in these states (repeatable)",
    )
    p.add_argument("--owner", help="only jobs of this owner")
    p.add_argument("--all", action="store_true", help="include every finished job")
    p.add_argument(
        "--recent",
        type=float,
        default=RECENT_S,
        metavar="SECONDS",
        help=f"also jobs that ended this recently (default {RECENT_S:g}; 0: none)",
    )

    p = add_command(sub, "job", show_job, common, "show one job in full, with its co-runners and GPU use")
    p.add_argument("job_id", metavar="ID")

    p = add_command(sub, "queue", show_queue, common, "pending jobs with their reasons, in queue order")
    p.add_argument("--owner", help="only jobs of this owner")

    p = add_command(sub, "cancel", cancel_job, common, "cancel a job")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--reason", default="", help="recorded with the cancellation")


async def list_jobs(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    states: tuple[JobState, ...] | None = ACTIVE_STATES
    recent = max(0.0, args.recent)
    if args.states:
        states, recent = tuple(args.states), 0.0
    elif args.all:
        states, recent = None, 0.0
    jobs = await client.list(states=states, owner=args.owner, finished_within_s=recent)
    if out.json:
        out.dump([job_record(j) for j in jobs])
        return 0
    rows = [
        (
            j.id,
            j.spec.name,
            j.state.value,
            fmt.truncate(j.spec.job_type, TYPE_WIDTH),
            gpus_text(j),
            node_text(j),
            predicted_speed(j),
            fmt.age(j.submitted_at),
            fmt.truncate(reason_text(j), REASON_WIDTH),
        )
        for j in jobs
    ]
    out.table(("ID", "NAME", "STATE", "TYPE", "GPUS", "NODE", "SPEED", "AGE", "REASON"), rows)
    return 0


async def show_queue(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    pending = await client.list(states=(JobState.PENDING,), owner=args.owner)
    listing = queue_listing(arrival_order(pending), _place)
    if out.json:
        out.dump([{**job_record(j), "queue": q, "position": i} for q, i, j in listing])
        return 0
    rows = [
        (
            q,
            i,
            j.id,
            j.spec.name,
            j.spec.owner,
            gpus_text(j),
            j.spec.priority,
            fmt.age(j.submitted_at),
            j.reason_code or "-",
            j.reason,
        )
        for q, i, j in listing
    ]
    out.table(("QUEUE", "#", "ID", "NAME", "OWNER", "GPUS", "PRIO", "WAITING", "CODE", "REASON"), rows)
    return 0


def arrival_order(jobs: list[Job]) -> list[Job]:
    """By priority, then age (horus_core.policies.base.arrival_order): the order of the jobs no
    scheduling pass has put in its own order yet."""
    return sorted(jobs, key=lambda j: (-j.spec.priority, j.submitted_at, j.id))


def _place(job: Job) -> tuple[str, int] | None:
    return (job.queue_name, job.queue_position) if job.queue_position > 0 else None


def reason_text(job: Job) -> str:
    """A pending job's reason with its code first (``Resources: needs ...``)."""
    return (
        f"{job.reason_code}: {job.reason}"
        if job.reason_code and job.state is JobState.PENDING
        else job.reason
    )


async def cancel_job(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    job = await client.cancel(args.job_id, args.reason)
    if out.json:
        out.dump(job_record(job))
    elif job.state.terminal:
        out.line(f"{job.id} {job.state.value}")
    else:  # its attempt is told to stop; the job turns CANCELLED once the worker says it did
        out.line(f"{job.id} cancelling: its attempt on {node_text(job)} is stopping (hctl wait {job.id})")
    return 0


async def show_job(client: HorusClient, args: argparse.Namespace, out: Output) -> int:
    job = await client.get(args.job_id)
    statuses = await client.gpus() if job.gpus and (job.state.active or job.nodes) else []
    node_of = {s.gpu.uuid: s.gpu.node for s in statuses}
    co_runners = co_runners_of(job, statuses)
    usage = usage_of(job, statuses)
    progress = await client.progress(job.id)
    if out.json:
        record = job_record(job, node_of)
        record["co_runners"] = co_runners
        record["gpu_stats"] = [job_gpu_stats_record(u) for u in usage]
        record["progress"] = progress_record(progress)
        out.dump(record)
        return 0
    ended = job.state if job.state.terminal else None
    out.line(fmt.render_fields(job_fields(job, node_of) + progress_fields(progress, ended)))
    if co_runners:
        out.line("Co-runners:")
        for uuid, ids in co_runners.items():
            out.line(f"  {uuid}: {', '.join(ids) if ids else '(none)'}")
    if usage:
        out.line("GPU use:")
        rows = [
            (u.gpu_uuid, u.attempt, fmt.pct(u.util_sm), fmt.mib(u.mem_used_mib), cap_of(u.cap_mib))
            for u in usage
        ]
        out.line(_indent(fmt.render_table(("GPU", "ATTEMPT", "UTIL", "MEM", "CAP"), rows)))
    return 0


def job_fields(job: Job, node_of: Mapping[str, str] | None = None) -> list[tuple[str, object]]:
    spec = job.spec
    parts = job_parts(job, node_of)
    nodes = "; ".join(f"{n} (rank {r}): {', '.join(g)}" for r, (n, g) in enumerate(parts))
    share = "exclusive" if spec.exclusive else "shared"
    return [
        ("ID", job.id),
        ("Name", spec.name),
        ("Owner", spec.owner),
        ("Type", spec.job_type),
        ("State", f"{job.state.value} (attempt {job.attempt})"),
        ("Reason", reason_text(job)),
        ("Queue position", f"{job.queue_position} in {job.queue_name}" if job.queue_position else "-"),
        ("Command", shlex.join(spec.command)),
        ("Image", spec.image or "(none: runs as a process)"),
        ("Requested", f"{requested_text(spec)}{shape_text(spec)}, {share}, priority {spec.priority}"),
        ("Speed floor", floor_text(spec)),
        ("GPU memory", memory_text(job)),
        ("GPU types", ", ".join(spec.gpu_types) or "(any)"),
        ("Queue", f"{spec.queue or '(default)'}, class {spec.priority_class or '(default)'}"),
        ("Stop grace", f"{spec.grace_s:g} s" if spec.grace_s > 0 else "(worker default)"),
        ("Hints", hints_text(job)),
        ("Model card", "(none)" if spec.model_card is None else card_summary(spec.model_card)),
        ("Node", job.node),
        ("GPUs", ", ".join(job.gpus)),
        *((("Nodes", nodes),) if len(parts) > 1 else ()),
        ("Predicted speed", _speed_text(job)),
        ("Last preempted", _preempted_text(job)),
        ("Submitted", fmt.timestamp(job.submitted_at)),
        ("Started", fmt.timestamp(job.started_at)),
        ("Finished", fmt.timestamp(job.finished_at)),
        ("Exit code", job.exit_code),
    ]


def _speed_text(job: Job) -> str:
    if job.attempt == 0:
        return "-"
    now = "" if job.state is not JobState.PENDING else " (its last attempt)"
    return f"{job.predicted_slowdown:.2f}x of its speed alone on a GPU{now}"


def _preempted_text(job: Job) -> str:
    if not job.last_preempted_at:
        return "never"
    return f"{fmt.timestamp(job.last_preempted_at)}: {job.last_preemption}"


def floor_text(spec: JobSpec) -> str:
    if spec.min_speed < 0:
        return "none (asked for no floor)"
    return f"{spec.min_speed:g}x of solo" if spec.min_speed > 0 else "(cluster default)"


def memory_text(job: Job) -> str:
    """The GPU memory cap per GPU and where it comes from, and the last measured peak."""
    spec, parts = job.spec, []
    if job.contained_mib > 0:
        parts.append(f"cap {caps.format_mib(job.contained_mib)}, alone since an attempt went over")
    elif spec.gpu_memory_mib > 0:
        parts.append(f"cap {caps.format_mib(spec.gpu_memory_mib)} (declared)")
    elif job.gpu_memory_cap_mib > 0:
        parts.append(f"cap {caps.format_mib(job.gpu_memory_cap_mib)} (its workload's footprint)")
    else:
        parts.append("no cap (its GPUs to itself)" if spec.exclusive else "cap set at placement")
    if job.gpu_memory_peak_mib > 0:
        parts.append(f"last attempt's peak {caps.format_mib(job.gpu_memory_peak_mib)}")
    return "; ".join(parts)


def requested_text(spec: JobSpec) -> str:
    if spec.elastic:
        return f"{format_gpus(spec)} GPU(s), elastic (starts on {spec.gpus})"
    return f"{spec.gpus} GPU(s)"


def shape_text(spec: JobSpec) -> str:
    """The " as 2 node(s) x 4"-style text for a job that asks for a multi-node shape ("" if none)."""
    if spec.nodes and spec.gpus_per_node:
        return f" as {spec.nodes} node(s) x {spec.gpus_per_node}"
    if spec.nodes:
        return f" on {spec.nodes} node(s)"
    return f", {spec.gpus_per_node} per node" if spec.gpus_per_node else ""


def hints_text(job: Job) -> str:
    h = job.spec.hints
    if h.util_avg is None and h.util_peak is None and h.mem_mib is None:
        return "(none)"
    avg = "-" if h.util_avg is None else fmt.pct(h.util_avg)
    peak = "-" if h.util_peak is None else fmt.pct(h.util_peak)
    mem = "-" if h.mem_mib is None else f"{h.mem_mib} MiB"
    return f"util avg {avg}, peak {peak}, memory {mem}"


def co_runners_of(job: Job, statuses: list[GpuStatus]) -> dict[str, list[str]]:
    """GPU UUID -> the other jobs on it, for each GPU of an active job."""
    if not job.state.active:
        return {}
    by_uuid = {s.gpu.uuid: s for s in statuses}
    return {
        uuid: [other for other in by_uuid[uuid].job_ids if other != job.id] if uuid in by_uuid else []
        for uuid in job.gpus
    }


def usage_of(job: Job, statuses: list[GpuStatus]) -> list[JobGpuStats]:
    """What the current attempt of an active job uses on each of its GPUs."""
    if not job.state.active:
        return []
    return [u for s in statuses for u in s.jobs if u.job_id == job.id and u.attempt == job.attempt]


def cap_of(mib: int) -> str:
    return fmt.mib(mib) if mib > 0 else "-"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
