"""Compare the packing policies on a Gavel trace with a small event-driven replay.

Not the project's simulator (``horus_core.sim``): a minimal stand-in that exists to back one
design decision (``horus`` refuses co-location below 0.8x, ``horus-paper`` does not). Jobs
run at their measured solo throughput (Gavel table) times their co-location speed, which the
same table gives (so the policies' predictions are exact here: an upper bound on the benefit of
interference awareness). Preempted jobs keep their progress.

    python bench/policy_compare.py [--trace PATH] [--nodes 2] [--gpus-per-node 8] [--jobs N]

Prints one JSON line per policy: average JCT and makespan in hours.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, Preempt
from horus_core.policies import make_policy


@dataclass
class Running:
    job: Job
    done: float = 0.0  # steps


def load_trace(path: Path | None, limit: int) -> list[Job]:
    if path is None:
        text = resources.files("horus_core.data").joinpath("traces/msr_seed0_2869ce_cap.trace").read_text()
    else:
        text = path.read_text()
    jobs = []
    for i, line in enumerate(text.splitlines()[:limit]):
        cols = line.split("\t")
        spec = JobSpec(("train",), gpus=int(cols[6]), job_type=cols[0], total_steps=int(cols[5]))
        jobs.append(Job(f"j{i:04d}", spec, JobState.PENDING, submitted_at=float(cols[9])))
    return jobs


def speeds(model: InterferenceModel, running: dict[str, Running], gpu: str = "v100") -> dict[str, float]:
    by_gpu: dict[str, list[str]] = {}
    for r in running.values():
        for uuid in r.job.gpus:
            by_gpu.setdefault(uuid, []).append(r.job.id)
    out = {jid: 1.0 for jid in running}
    for ids in by_gpu.values():
        sp = model.co_speeds([running[i].job.spec.job_type for i in ids], gpu)
        for jid, s in zip(ids, sp, strict=True):
            out[jid] = min(out[jid], s)
    return out


def replay(policy_name: str, jobs: list[Job], nodes: tuple[Node, ...]) -> dict[str, float]:
    model = default_model()
    truth = default_model()
    policy = make_policy(policy_name, model)
    arrivals = sorted(jobs, key=lambda j: j.submitted_at)
    pending: dict[str, Job] = {}
    running: dict[str, Running] = {}
    progress: dict[str, float] = {}
    finished: dict[str, float] = {}
    now, nxt, decisions = 0.0, 0, 0
    while len(finished) < len(jobs):
        while nxt < len(arrivals) and arrivals[nxt].submitted_at <= now:
            pending[arrivals[nxt].id] = arrivals[nxt]
            nxt += 1
        snap = ClusterSnapshot(nodes, tuple(pending.values()) + tuple(r.job for r in running.values()))
        decisions += 1
        for act in policy.decide(snap, now):
            if isinstance(act, Assign):
                job = pending.pop(act.job_id)
                running[job.id] = Running(
                    replace(job, state=JobState.RUNNING, node=act.node, gpus=act.gpus, started_at=now),
                    progress.get(job.id, 0.0),
                )
            elif isinstance(act, Preempt) and act.job_id in running:
                r = running.pop(act.job_id)
                progress[r.job.id] = r.done
                pending[r.job.id] = replace(r.job, state=JobState.PENDING, gpus=(), node="")
        rates = {
            jid: sp * (truth.solo_throughput(r.job.spec.job_type, r.job.spec.gpus, "v100") or 0.0)
            for jid, sp in speeds(truth, running).items()
            for r in [running[jid]]
        }
        horizon = arrivals[nxt].submitted_at if nxt < len(arrivals) else float("inf")
        for jid, rate in rates.items():
            if rate > 0:
                horizon = min(horizon, now + (running[jid].job.spec.total_steps - running[jid].done) / rate)
        if horizon == float("inf"):
            raise RuntimeError(f"{policy_name}: stuck with {len(pending)} pending jobs")
        for jid, rate in rates.items():
            running[jid].done += rate * (horizon - now)
            if running[jid].done >= running[jid].job.spec.total_steps * (1 - 1e-9):
                finished[jid] = horizon
                del running[jid]
        now = horizon
    jct = [finished[j.id] - j.submitted_at for j in jobs]
    return {"avg_jct_h": sum(jct) / len(jct) / 3600, "makespan_h": max(finished.values()) / 3600,
            "decisions": decisions}  # fmt: skip


def cluster(n_nodes: int, per_node: int) -> tuple[Node, ...]:
    def gpu(i: int, k: int) -> Gpu:
        return Gpu(f"n{i}-g{k}", f"n{i}", k, "V100-SXM2-16GB", 16160, "v100")

    return tuple(Node(f"n{i}", tuple(gpu(i, k) for k in range(per_node))) for i in range(n_nodes))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--policies", default="fifo,binpack,gandiva,lucid,horus-paper,horus,horus+")
    args = ap.parse_args()
    jobs = load_trace(args.trace, args.jobs)
    nodes = cluster(args.nodes, args.gpus_per_node)
    for name in args.policies.split(","):
        t0 = time.perf_counter()
        out = replay(name, jobs, nodes)
        print(json.dumps({"bench": "policy_compare", "policy": name, "jobs": len(jobs),
                          "gpus": args.nodes * args.gpus_per_node, **{k: round(v, 2) for k, v in out.items()},
                          "wall_s": round(time.perf_counter() - t0, 1)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
