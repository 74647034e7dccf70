"""Failover time: kill -9 of the leader, to the first placement by the next leader, N times.

Three masters on a private PostgreSQL, two workers with simulated GPUs and submitters running
(the failover suite's cluster, tests/failover/harness.py); after each kill the killed master comes
back as a standby. Needs PostgreSQL's server binaries (bash scripts/pg-dev.sh installs them).

    python bench/failover.py [--kills 20] [--lease-s 10]

JSON lines: one per kill ({"bench": "failover", "kill": i, "s": ...}), then the summary with the
median and the maximum, and each as a multiple of the lease (the in-run reference: a takeover
cannot come before the lease runs out).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.failover.checks import failover_s  # noqa: E402
from tests.failover.harness import ha_cluster  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--lease-s", type=float, default=10.0)
    args = ap.parse_args()
    took: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, ha_cluster(pathlib.Path(tmp), args.lease_s) as cluster:
        cluster.start_submitters()
        time.sleep(5.0)
        for i in range(args.kills):
            old = cluster.leader()
            death = cluster.kill(old)
            took.append(failover_s(cluster, death))
            print(json.dumps({"bench": "failover", "kill": i, "s": round(took[-1], 2)}), flush=True)
            cluster.start_master(old)
            time.sleep(2.0)
    med, top = statistics.median(took), max(took)
    print(json.dumps({
        "bench": "failover", "kills": len(took), "lease_s": args.lease_s, "median_s": round(med, 2),
        "max_s": round(top, 2), "median_x_lease": round(med / args.lease_s, 2),
        "max_x_lease": round(top / args.lease_s, 2), "unit": "s from kill -9 to the first new placement",
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
