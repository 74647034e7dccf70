"""What the queue wrapper costs per pass: ``QueuedPolicy(P).decide`` against ``P.decide`` on the
same snapshot, in the same run. Half the jobs run, half wait; jobs belong to four teams' queues
(nominal = a quarter of the GPUs each, borrowing up to another quarter), two users per team.

    python bench/queues_overhead.py [--sizes 256 1024 4096] [--policies fifo horus] [--repeat 3]

One JSON line each: {"bench": "queues_overhead", "policy", "jobs", "gpus", "plain_ms",
"queued_ms", "ratio"} (CPU time of the process, the median of ``--repeat`` fresh policies).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_time import snapshot_of

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Assign, ClusterSnapshot, JobState
from horus_core.policies import make_policy
from horus_core.policies.base import Policy
from horus_core.queues import QueueConfig, QueuedPolicy, parse_config

TEAMS = 4


def config_for(gpus: int) -> QueueConfig:
    share = max(1, gpus // TEAMS)
    queues = {
        f"t{i}": {"nominal": {"*": share}, "borrowing_limit": share, "users": [f"t{i}-0", f"t{i}-1"]}
        for i in range(TEAMS)
    }
    return parse_config({"queues": queues})


def with_teams(snap: ClusterSnapshot) -> ClusterSnapshot:
    """Every job gets a team and user; the first half are placed by a plain fifo pass first."""
    jobs = []
    for i, j in enumerate(snap.jobs):
        spec = dataclasses.replace(j.spec, owner=f"t{i % TEAMS}-{i // TEAMS % 2}")
        jobs.append(dataclasses.replace(j, spec=spec))
    half = ClusterSnapshot(snap.nodes, tuple(jobs[: len(jobs) // 2]))
    placed = {a.job_id: a for a in make_policy("fifo").decide(half, 0.0) if isinstance(a, Assign)}
    out = []
    for j in jobs:
        a = placed.get(j.id)
        out.append(
            j
            if a is None
            else dataclasses.replace(j, state=JobState.RUNNING, node=a.node, gpus=a.gpus, attempt=1)
        )
    return ClusterSnapshot(snap.nodes, tuple(out))


def queued_policy(name: str, model: InterferenceModel, cfg: QueueConfig) -> Policy:
    return QueuedPolicy(make_policy(name, model), cfg)


def cpu_ms(make: Callable[[], Policy], snap: ClusterSnapshot, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        policy = make()
        c = time.process_time()
        policy.decide(snap, 1_000_000.0)
        times.append(time.process_time() - c)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--policies", nargs="+", default=["fifo", "horus"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model = default_model()
    for name in args.policies:  # compile / load Numba kernels
        make_policy(name, model).decide(snapshot_of(16), 1.0)
    for n in args.sizes:
        snap = with_teams(snapshot_of(n))
        gpus = len(snap.ready_gpus())
        cfg = config_for(gpus)
        for name in args.policies:
            plain = cpu_ms(functools.partial(make_policy, name, model), snap, args.repeat)
            queued = cpu_ms(functools.partial(queued_policy, name, model, cfg), snap, args.repeat)
            line = {"bench": "queues_overhead", "policy": name, "jobs": n, "gpus": gpus}
            line |= {
                "plain_ms": round(plain, 2),
                "queued_ms": round(queued, 2),
                "ratio": round(queued / plain, 2),
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
