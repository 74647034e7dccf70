"""Are a tree's scheduling results identical to a baseline's? (issue 40's equivalence check)

Runs ``horus-sim --json`` on one trace for every registered policy (or ``--policies``) on each
cluster of ``CLUSTERS``, at ``--min-speed 0`` and at the default floor (17 policies x 2 clusters
x 2 floors = 68 runs), in ``--jobs`` parallel processes, one per (cluster, floor, policy), and
drops the wall-clock fields (``decide_ms_*``, ``sim_s``).

    git archive aaf11c8 | tar -x -C /tmp/base-tree                 # the base tree, once
    python scripts/sim_identical.py --save /tmp/core-baseline --tree /tmp/base-tree   # its runs
    python scripts/sim_identical.py --compare /tmp/core-baseline   # N/68 identical, the diffs
    python scripts/sim_identical.py --compare DIR --policies fifo,binpack,horus   # a quick subset

Each run is one JSON file ``<cluster>__<floor>__<policy>.json`` under the directory; exit status
1 when a compared run differs or is missing, or a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "horus_core" / "data" / "traces" / "msr_seed0_2869ce_cap.trace"
CLUSTERS = ("v100:16", "k80:24,p100:24,v100:24")
FLOORS = ("0", "default")
WALL = ("decide_ms_mean", "decide_ms_p95", "decide_ms_max", "sim_s")


def registered(tree: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", "from horus_core.policies import policy_names; print(*policy_names())"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    return out.stdout.split()


def run_one(
    cluster: str, floor: str, policy: str, trace: Path, tree: Path, first: int = 0
) -> tuple[str, dict[str, object] | str]:
    """(the run's file name, its metrics without wall-clock fields, or the error text)."""
    name = f"{cluster.replace(':', '').replace(',', '_')}__{floor}__{policy}.json"
    cmd = [
        str(Path(sys.executable).parent / "horus-sim"),
        "--trace",
        str(trace),
        "--cluster",
        cluster,
        "--policies",
        policy,
        "--json",
        "--no-plots",
    ]
    cmd += [] if floor == "default" else ["--min-speed", floor]
    cmd += ["--jobs", str(first)] if first else []
    env = {**os.environ, "PYTHONPATH": str(tree)}  # (the tree's horus_core before the installed one)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, env=env)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        return name, f"rc {done.returncode}: {done.stderr.strip()[-400:]}"
    metrics = json.loads(done.stdout)[policy]
    return name, {k: v for k, v in metrics.items() if k not in WALL}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, metavar="DIR", help="write each run's JSON under DIR")
    mode.add_argument("--compare", type=Path, metavar="DIR", help="compare each run with DIR's")
    p.add_argument("--policies", help="comma-separated subset (default: every registered policy)")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the source tree to run (default: this one), "
        "e.g. an export of the base commit: git archive BASE | tar -x -C DIR",
    )
    p.add_argument("--jobs", type=int, default=2, help="parallel processes (default 2)")
    p.add_argument(
        "--first",
        type=int,
        default=0,
        metavar="N",
        help="a quick look: the trace's first N jobs only (not the criterion)",
    )
    args = p.parse_args()
    policies = args.policies.split(",") if args.policies else registered(args.tree.resolve())
    runs = [(c, f, pol) for c in CLUSTERS for f in FLOORS for pol in policies]
    started = time.perf_counter()
    trace, tree = args.trace.resolve(), args.tree.resolve()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda r: run_one(r[0], r[1], r[2], trace, tree, args.first), runs))
    bad = 0
    same = 0
    for name, got in results:
        if isinstance(got, str):
            print(f"FAILED {name}: {got}")
            bad += 1
            continue
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / name).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
            continue
        path = args.compare / name
        want = json.loads(path.read_text()) if path.exists() else None
        if want == json.loads(json.dumps(got)):
            same += 1
            continue
        bad += 1
        if want is None:
            print(f"MISSING in baseline: {name}")
        else:
            keys = sorted(set(want) | set(got))
            diff = ", ".join(f"{k}: {want.get(k)} -> {got.get(k)}" for k in keys if want.get(k) != got.get(k))
            print(f"DIFFERS {name}: {diff}")
    took = time.perf_counter() - started
    verdict = "saved" if args.save is not None else "identical"
    print(
        json.dumps(
            {
                "runs": len(runs),
                verdict: same if args.compare else len(runs) - bad,
                "bad": bad,
                "wall_s": round(took, 1),
            }
        )
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
