"""Study: how much does queue order alone move average JCT? (evidence for docs/evaluation.md)

Two reference schedulers that are NOT product policies (they live here, not in
horus_core/policies), both exclusive-GPU, one job per node gang, run through the real simulator:

- ``fifo-strict``: fifo without backfill (the head of the queue blocks everything behind it),
  as Gavel's FIFO policy behaves.
- ``sjf``: non-preemptive, shortest estimated work first (total_steps / solo throughput x GPUs),
  with backfill: fifo's mechanism with another queue order.
- ``las``: preemptive least-attained-service (seconds of running received so far), the discrete
  cousin of Gavel's max-min fairness: each round the jobs with the least service get the GPUs;
  a running job is stopped only after ``min_slice_s`` in its current attempt. ``las-gpu`` counts
  service in GPU-seconds instead (Tiresias' 2D-LAS), which starves 8-GPU gangs.

    .venv/bin/python studies/sim_order_study.py [--cluster v100:16] [--restart-cost-s 30]

Prints one JSON line per (policy, restart cost).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, replace

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobState, NodeState, Preempt, Wait
from horus_core.policies import Policy, make_policy
from horus_core.sim import SimConfig, Simulator, build_cluster, load_trace, summarize

TRACE = "horus_core/data/traces/msr_seed0_2869ce_cap.trace"


def gpus_by_node(snapshot: ClusterSnapshot) -> dict[str, list[Gpu]]:
    """Healthy GPUs of READY nodes, grouped by node, in index order."""
    out: dict[str, list[Gpu]] = {}
    for node in snapshot.nodes:
        if node.state is NodeState.READY:
            out[node.name] = sorted((g for g in node.gpus if g.healthy), key=lambda g: g.index)
    return out


def work_s(job: Job, model: InterferenceModel) -> float:
    """GPU-seconds the job needs alone on a V100 (its size for shortest-first orders)."""
    solo = model.solo_throughput(job.spec.job_type, job.spec.gpus, "v100") or 1.0
    return job.spec.total_steps / solo * job.spec.gpus


def place(order: list[Job], free: dict[str, list[str]]) -> tuple[list[Action], set[str]]:
    """Best-fit gangs for ``order`` onto ``free`` (node -> free uuids); returns assigns and ids placed."""
    actions: list[Action] = []
    placed: set[str] = set()
    for job in order:
        fits = sorted((len(u), n) for n, u in free.items() if len(u) >= job.spec.gpus)
        if not fits:
            actions.append(Wait(job.id, "no node has enough free GPUs"))
            continue
        node = fits[0][1]
        chosen, free[node] = free[node][: job.spec.gpus], free[node][job.spec.gpus :]
        actions.append(Assign(job.id, node, tuple(chosen)))
        placed.add(job.id)
    return actions, placed


def free_gpus(snapshot: ClusterSnapshot) -> dict[str, list[str]]:
    busy = {u for j in snapshot.active() for u in j.gpus}
    return {n: [g.uuid for g in gs if g.uuid not in busy] for n, gs in gpus_by_node(snapshot).items()}


@dataclass
class ShortestFirst:
    model: InterferenceModel
    name: str = "sjf"

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        order = sorted(snapshot.pending(), key=lambda j: (work_s(j, self.model), j.submitted_at, j.id))
        return place(order, free_gpus(snapshot))[0]


@dataclass
class StrictFifo:
    name: str = "fifo-strict"

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        free = free_gpus(snapshot)
        actions: list[Action] = []
        for job in sorted(snapshot.pending(), key=lambda j: (j.submitted_at, j.id)):
            step, _ = place([job], free)
            actions += step
            if not isinstance(step[0], Assign):
                break
        return actions


@dataclass
class ShortestFirstOrder:
    """Wraps a policy so that it serves its queue shortest estimated work first: the snapshot it
    sees gives pending jobs a priority by rank (every policy here serves higher priority first)."""

    inner: Policy
    model: InterferenceModel
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.inner.name}-sjf"

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        pending = sorted(snapshot.pending(), key=lambda j: (work_s(j, self.model), j.submitted_at, j.id))
        ranked = {j.id: replace(j, spec=replace(j.spec, priority=-rank)) for rank, j in enumerate(pending)}
        jobs = tuple(ranked.get(j.id, j) for j in snapshot.jobs)
        return self.inner.decide(ClusterSnapshot(snapshot.nodes, jobs), now)


@dataclass
class LeastAttained:
    name: str = "las"
    min_slice_s: float = 360.0
    gpu_weighted: bool = False
    attained: dict[str, float] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)  # start of the current attempt
    last: float = 0.0

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        running = snapshot.active()
        for job in running:
            weight = len(job.gpus) if self.gpu_weighted else 1
            self.attained[job.id] = self.attained.get(job.id, 0.0) + (now - self.last) * weight
            self.since.setdefault(job.id, now)
        self.last = now
        order = sorted(snapshot.jobs, key=lambda j: (self.attained.get(j.id, 0.0), j.submitted_at, j.id))
        nodes = gpus_by_node(snapshot)
        free = {n: [g.uuid for g in gs] for n, gs in nodes.items()}
        keep = {j.id for j in running if now - self.since[j.id] < self.min_slice_s}
        chosen = self._choose(order, {n: len(u) for n, u in free.items()}, keep, running)
        stop = [j for j in running if j.id not in chosen]
        stay = [j for j in running if j.id in chosen]
        for job in stay:
            free[job.node] = [u for u in free[job.node] if u not in job.gpus]
        start = [j for j in order if j.id in chosen and j.state is JobState.PENDING]
        for job in stop:
            self.since.pop(job.id, None)
        actions: list[Action] = [Preempt(j.id, "less attained service waits") for j in stop]
        return actions + place(start, free)[0]

    @staticmethod
    def _choose(order: list[Job], cap: dict[str, int], keep: set[str], running: tuple[Job, ...]) -> set[str]:
        """Jobs to run this round: the young running ones, then least attained first, by node room."""
        chosen: set[str] = set()
        for job in running:
            if job.id in keep:
                cap[job.node] -= len(job.gpus)
                chosen.add(job.id)
        for job in order:
            if job.id in chosen:
                continue
            if job.state is JobState.RUNNING and cap[job.node] >= len(job.gpus):
                cap[job.node] -= len(job.gpus)
                chosen.add(job.id)
                continue
            fits = sorted((c, n) for n, c in cap.items() if c >= job.spec.gpus)
            if fits and job.state is JobState.PENDING:
                cap[fits[0][1]] -= job.spec.gpus
                chosen.add(job.id)
        return chosen


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cluster", default="v100:16")
    p.add_argument("--trace", default=TRACE)
    p.add_argument("--restart-cost-s", type=float, nargs="*", default=[0.0, 30.0])
    p.add_argument("--policies", default="fifo,fifo-strict,sjf,las,las-gpu")
    args = p.parse_args()
    model = default_model()
    jobs = load_trace(args.trace)
    for name in args.policies.split(","):
        for cost in args.restart_cost_s:
            studies: dict[str, Policy] = {
                "sjf": ShortestFirst(model),
                "fifo-strict": StrictFifo(),
                "las": LeastAttained(),
                "las-gpu": LeastAttained(name="las-gpu", gpu_weighted=True),
            }
            if name.endswith("-sjf"):
                studies[name] = ShortestFirstOrder(make_policy(name.removesuffix("-sjf"), model), model)
            policy = studies[name] if name in studies else make_policy(name, model)
            config = SimConfig(restart_cost_s=cost)
            result = Simulator(jobs, build_cluster(args.cluster), policy, model, config).run()
            m = summarize(result)
            keys = ("avg_jct_h", "p50_jct_h", "p95_jct_h", "makespan_h", "useful_util", "preemptions")
            row = {k: round(float(m[k]), 2) for k in keys}
            print(json.dumps({"policy": name, "cluster": args.cluster, "restart_cost_s": cost, **row}))


if __name__ == "__main__":
    main()
