"""Horus pilots on a real one-node Slurm (scripts/slurm-dev.sh): how long from ``horus-slurm up``
to the first job running, and from a pilot's warning signal to its job re-queued.

    .venv/bin/python bench/slurm_pilots.py [--repeat 3]

One JSON line per figure (median and each run, seconds), each next to its reference measured in
the same run without Slurm: a plain ``horus-worker`` started by hand for the first, ``hctl drain``
of a plain worker for the second (the same drain; what the warning adds is Slurm's signal, the
pilot's squeue call and its DrainSelf message). Needs root and Debian's slurm-wlm and munge.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from horus_core.client import SyncHorusClient  # noqa: E402
from horus_core.model import JobSpec, JobState  # noqa: E402
from tests.e2e.cluster import LocalCluster, stop_processes, workload_cmd  # noqa: E402
from tests.slurm.devslurm import DevSlurm  # noqa: E402

POLL_S = 0.05


def until(fn: Callable[[], bool], timeout: float = 120.0) -> float:
    """Seconds until ``fn()`` holds (polled every 50 ms)."""
    t0 = time.monotonic()
    while not fn():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("condition not met")
        time.sleep(POLL_S)
    return time.monotonic() - t0


def pilot_flags(slurm: DevSlurm, master: LocalCluster) -> list[str]:
    return [
        "up",
        "--master",
        master.addr,
        "--gpus-per-node",
        "2",
        "--time",
        "10",
        "--warn-s",
        "30",
        "--stop-s",
        "29",
        "--output",
        str(slurm.root / "pilot-%j.out"),
        "--worker-args",
        "--fake-gpus 4 --grace-s 1",
    ]


def up_to_first_job(slurm: DevSlurm, master: LocalCluster, client: SyncHorusClient) -> float:
    job = client.submit(JobSpec(command=tuple(workload_cmd(0.5)), gpus=2, name="first"))
    t0 = time.monotonic()
    slurm.horus_slurm(*pilot_flags(slurm, master))
    until(lambda: client.get(job.id).state in (JobState.RUNNING, JobState.SUCCEEDED))
    took = time.monotonic() - t0
    client.wait(job.id, timeout=60)
    slurm.horus_slurm("down", "--all")
    slurm.wait_gone(slurm.active(), timeout=60)
    return took


def plain_worker_to_first_job(master: LocalCluster, client: SyncHorusClient, i: int) -> float:
    job = client.submit(JobSpec(command=tuple(workload_cmd(0.5)), gpus=2, name="first-plain"))
    t0 = time.monotonic()
    master.start_worker(f"plain-{i}", "2")
    until(lambda: client.get(job.id).state in (JobState.RUNNING, JobState.SUCCEEDED))
    took = time.monotonic() - t0
    client.wait(job.id, timeout=60)
    stop_processes([master.workers.pop(f"plain-{i}")])
    return took


def warning_to_requeued(slurm: DevSlurm, master: LocalCluster, client: SyncHorusClient) -> float:
    slurm.horus_slurm(*pilot_flags(slurm, master))
    until(lambda: any(n.slurm is not None and n.state.value == "READY" for n in client.nodes()))
    job = client.submit(JobSpec(command=tuple(workload_cmd(30.0)), gpus=2, name="warned", grace_s=1))
    until(lambda: client.get(job.id).state is JobState.RUNNING)
    pilot = client.get(job.id).node.removeprefix("slurm-")
    t0 = time.monotonic()
    slurm.run("scancel", "--signal=USR1", "--batch", pilot)
    until(lambda: client.get(job.id).state is JobState.PENDING)
    took = time.monotonic() - t0
    client.cancel(job.id)
    slurm.horus_slurm("down", "--all")
    slurm.wait_gone(slurm.active(), timeout=60)
    return took


def drain_to_requeued(master: LocalCluster, client: SyncHorusClient, i: int) -> float:
    name = f"drained-{i}"
    master.start_worker(name, "2")
    until(lambda: any(n.name == name and n.state.value == "READY" for n in client.nodes()))
    job = client.submit(JobSpec(command=tuple(workload_cmd(30.0)), gpus=2, name="drained", grace_s=1))
    until(lambda: client.get(job.id).state is JobState.RUNNING)
    t0 = time.monotonic()
    master.hctl("drain", name, "--timeout", "1")  # (the pilots drain with --warn-s 30 - --stop-s 29 = 1 s)
    until(lambda: client.get(job.id).state is JobState.PENDING)
    took = time.monotonic() - t0
    client.cancel(job.id)
    stop_processes([master.workers.pop(name)])
    return took


def line(figure: str, runs: list[float], ref_name: str, ref: list[float]) -> str:
    med, ref_med = statistics.median(runs), statistics.median(ref)
    return json.dumps(
        {
            "bench": "slurm_pilots",
            "figure": figure,
            "unit": "s",
            "median": round(med, 3),
            "runs": [round(r, 3) for r in runs],
            "reference": ref_name,
            "reference_median": round(ref_med, 3),
            "reference_runs": [round(r, 3) for r in ref],
            "ratio": round(med / ref_med, 3),
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="horus-bench-slurm-") as tmp:
        slurm = DevSlurm(pathlib.Path(tmp) / "slurm")
        slurm.start()
        master = LocalCluster(pathlib.Path(tmp))
        try:
            master.start_master()
            with SyncHorusClient.connect(master.addr) as client:
                ups = [up_to_first_job(slurm, master, client) for _ in range(args.repeat)]
                plain = [plain_worker_to_first_job(master, client, i) for i in range(args.repeat)]
                print(
                    line("up_to_first_job_running", ups, "plain_worker_to_first_job_running", plain),
                    flush=True,
                )
                warned = [warning_to_requeued(slurm, master, client) for _ in range(args.repeat)]
                drained = [drain_to_requeued(master, client, i) for i in range(args.repeat)]
                print(line("warning_to_requeued", warned, "hctl_drain_to_requeued", drained), flush=True)
        finally:
            master.stop()
            ids = slurm.active()
            if ids:
                subprocess.run(["scancel", *ids], env=slurm.env, check=False)
            slurm.stop()


if __name__ == "__main__":
    main()
