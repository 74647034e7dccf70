"""Turn trace jobs into simulator jobs for one cluster: ids, specs, GPU caps, solo throughputs.

A job larger than a node is spread over nodes by the policies (issue 11); one asking for more
GPUs than the largest GPU type of the cluster has in all could never run and is capped to that
(counted as ``capped_cluster``). A job whose GPU count the throughput table never measured for
its type (Gavel measured 1/2/4/8 GPUs, and Recommendation, A3C and CycleGAN at 1 GPU only) is
lowered to the largest measured count below it, as Gavel's ``*_cap`` traces do (counted as
``capped_measured``), except above the largest measured count of a type measured at two or
more counts: that rate is extrapolated (:mod:`horus_core.sim.scaling`; counted as
``extrapolated``). A job type the table does not know at all
needs ``duration_s`` in the trace: its solo throughput is then ``total_steps / duration_s`` on
every GPU type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec, Node
from horus_core.sim.columns import JobColumns
from horus_core.sim.rates import RateCache
from horus_core.sim.scaling import extrapolate
from horus_core.sim.state import SimJob
from horus_core.sim.traces import TraceJob

SIM_COMMAND = ("horus-sim-job",)
_COUNTS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(slots=True)
class Prepared:
    jobs: list[SimJob]
    cols: JobColumns  # the jobs' running totals (row = index)
    capped_cluster: int = 0
    capped_measured: int = 0
    extrapolated: int = 0
    warnings: list[str] = field(default_factory=list)


def prepare_jobs(
    trace: Sequence[TraceJob], nodes: Sequence[Node], rates: RateCache, min_speed: float = 0.0
) -> Prepared:
    """Simulator jobs in arrival order (ties keep trace order), ids ``j000000``, ``j000001``, ...;
    each with the speed floor ``min_speed`` (the cluster default, as the master fills it in)."""
    max_node = max((len(n.gpus) for n in nodes), default=0)
    if max_node == 0:
        raise InvalidArgument("cluster", "the cluster has no GPU")
    gpu_types = sorted({g.gpu_type for n in nodes for g in n.gpus})
    per_type = Counter(g.gpu_type for n in nodes for g in n.gpus)
    biggest = max(per_type.values())
    width = max(6, len(str(len(trace))))
    out = Prepared(jobs=[], cols=JobColumns(len(trace)))
    ordered = sorted(range(len(trace)), key=lambda i: trace[i].arrival_s)
    for idx, pos in enumerate(ordered):
        tj = trace[pos]
        gpus = min(tj.gpus, biggest)
        out.capped_cluster += gpus < tj.gpus
        measured = _largest_measured(rates, tj.job_type, gpus, gpu_types)
        wide = _extrapolated(rates, tj.job_type, gpus, gpu_types) if measured is not None else None
        if wide is not None:
            out.extrapolated += 1
        elif measured is not None and measured < gpus:
            out.capped_measured += 1
            gpus = measured
        solo = wide or _solo_by_type(rates, tj, gpus, gpu_types, measured is not None)
        spec = JobSpec(
            command=SIM_COMMAND,
            gpus=gpus,
            name=f"{tj.job_type} #{pos}",
            job_type=tj.job_type,
            priority=tj.priority,
            total_steps=tj.total_steps,
            min_speed=min_speed,
            owner=tj.owner,
            queue=tj.queue,
            gpu_types=tj.gpu_types,
            exclusive=tj.exclusive,
            priority_class=tj.priority_class,
        )
        job_id = f"j{idx:0{width}d}"
        signature = rates.model.signature(spec)
        out.jobs.append(
            SimJob(idx, job_id, spec, signature, tj.arrival_s, float(tj.total_steps), solo, out.cols)
        )
    if out.capped_cluster:
        out.warnings.append(
            f"{out.capped_cluster} job(s) asked for more than {biggest} GPUs: capped to the cluster's size"
        )
    if out.capped_measured:
        out.warnings.append(
            f"{out.capped_measured} job(s) lowered to the largest GPU count measured for their type"
        )
    return out


def _largest_measured(rates: RateCache, job_type: str, gpus: int, gpu_types: Sequence[str]) -> int | None:
    """The largest count <= gpus measured on some GPU type (powers of two and ``gpus`` itself)."""
    candidates = sorted({gpus, *(c for c in _COUNTS if c <= gpus)}, reverse=True)
    for count in candidates:
        if any(rates.solo(job_type, count, t) is not None for t in gpu_types):
            return count
    return None


def _extrapolated(
    rates: RateCache, job_type: str, gpus: int, gpu_types: Sequence[str]
) -> dict[str, float] | None:
    """Solo rates per GPU type for a count above every count measured for the type, from the
    power law (None: ``gpus`` is not above them all, or no type has two measured counts)."""
    measured = {t: {w: rates.solo(job_type, w, t) for w in _COUNTS} for t in gpu_types}
    known = {t: {w: r for w, r in per.items() if r is not None} for t, per in measured.items()}
    if any(w >= gpus for per in known.values() for w in per):
        return None
    out = {t: extrapolate(list(per), list(per.values()), gpus) or 0.0 for t, per in known.items()}
    return out if any(out.values()) else None


def _solo_by_type(
    rates: RateCache, tj: TraceJob, gpus: int, gpu_types: Sequence[str], known: bool
) -> dict[str, float]:
    if known:
        return {t: rates.solo(tj.job_type, gpus, t) or 0.0 for t in gpu_types}
    if tj.duration_s is None:
        raise InvalidArgument(
            "trace",
            f"job type {tj.job_type!r} has no measured throughput on {', '.join(gpu_types)}; "
            "give its duration_s in a CSV trace",
        )
    return dict.fromkeys(gpu_types, tj.total_steps / tj.duration_s)
