"""Reason-code benchmark: what the master adds to a scheduling pass for "why is my job pending?".

On G V100s (8 per node) and J jobs (GPU counts from the Philly trace, Gavel job types), the
``horus`` policy decides once (the in-run reference, ``decide_ms``); then the master's additions
are timed over its actions: ``positions_ms`` (each waiting job's queue and position,
``reasoncodes.QueuePositions``: paid by the first GetJob/ListJobs/queue page after a pass, on the
event loop; the pass itself only keeps its action list) and ``refine_ms`` (with one node cordoned
and one GPU quarantined: what is out of service and ``reasoncodes.classify`` over the actions,
run in the pass's decide thread, only while something is out of service).

    python bench/reason_codes.py [--jobs 12500] [--gpus 8192] [--repeat 5]

One JSON line: {"bench": "reason_codes", "jobs", "gpus", "waits", "decide_ms", "positions_ms",
"refine_ms", "positions_ratio", "refine_ratio"} (medians; ratios against decide_ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from placement import gpu_counts, new_jobs, v100_nodes

from horus_core import reasoncodes as rc
from horus_core.interference import default_model
from horus_core.model import ClusterSnapshot, NodeState, Wait
from horus_core.policies import make_policy


def timed(fn: object, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=12_500)
    p.add_argument("--gpus", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=str(pathlib.Path(__file__).resolve().parents[1] / "horus_core" / "data"))
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    model = default_model()
    jobs = new_jobs(args.jobs, gpu_counts(pathlib.Path(args.data)), model.known_job_types(), rng, "j", 0.0)
    nodes = v100_nodes(args.gpus)
    snapshot = ClusterSnapshot(nodes, tuple(jobs))
    policy = make_policy("horus", model)
    actions = policy.decide(snapshot, 10.0)  # (compiles and warms the policy's caches)
    decide_ms = timed(lambda: policy.decide(snapshot, 10.0), args.repeat)
    by_id = {j.id: j for j in jobs}
    waits = [a for a in actions if isinstance(a, Wait)]
    positions_ms = timed(lambda: rc.QueuePositions(actions, by_id.get).get(waits[-1].job_id), args.repeat)
    bad = dataclasses.replace(nodes[1].gpus[0], healthy=False, quarantine="Xid 79")
    shown = (
        dataclasses.replace(nodes[0], state=NodeState.CORDONED),
        dataclasses.replace(nodes[1], gpus=(bad, *nodes[1].gpus[1:])),
        *nodes[2:],
    )

    def refine() -> None:
        held = shown[:2]  # (the master looks only at the nodes something is held on)
        withheld = rc.out_of_service(held, [j for j in jobs if j.node in ("n0", "n1")])
        rc.classify(actions, snapshot.pending(), withheld)

    refine_ms = timed(refine, args.repeat)
    print(
        json.dumps(
            {
                "bench": "reason_codes",
                "jobs": args.jobs,
                "gpus": args.gpus,
                "waits": len(waits),
                "decide_ms": round(decide_ms, 2),
                "positions_ms": round(positions_ms, 2),
                "refine_ms": round(refine_ms, 2),
                "positions_ratio": round(positions_ms / decide_ms, 4),
                "refine_ratio": round(refine_ms / decide_ms, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
