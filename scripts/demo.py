"""`make demo`: a one-minute tour of Horus on an embedded cluster.

1. starts a real master (SQLite, policy `horus`) and two real workers with 4 simulated V100s each,
   as local processes on 127.0.0.1;
2. submits a sample workload: jobs of Gavel's measured job types (`physical_small_test.trace`,
   shipped in the package), scaled from hours to seconds; the simulated GPUs slow co-located jobs
   down by the measured pair throughputs, so a bad pairing really costs time;
3. waits for the placements (not for a set time: on a fresh clone the first scheduling pass
   compiles the packing kernels, which the demo does ahead) and shows which jobs share which GPU,
   with `hctl gpus`, while the master's web dashboard (its address is printed) shows the same live;
4. shows where each job ran, who shared a GPU with whom and the predicted speed, with `hctl`;
5. replays a real 533-job Philly trace through the simulator with the same policies, and prints
   why interference-aware packing beats exclusive GPUs and interference-blind packing
   (``--skip-comparison`` leaves that step out).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import resources

from horus_core import HorusClient
from horus_core.floor import DEFAULT_MIN_SPEED
from horus_core.model import JobSpec, JobState
from horus_core.sim.traces import load_trace

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent
BOLD, DIM, OFF = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")
JOBS = 16  # jobs from the sample trace
SECONDS_PER_JOB = (6.0, 14.0)  # solo duration range after scaling
START_WAIT_S = 600.0  # at most, for the cluster to place anything: a bound for a broken master
POLICIES = {
    "fifo": "exclusive GPUs (fifo: Kubernetes, Slurm)",
    "binpack": "interference-blind packing (binpack)",
    "horus": "Horus",
}


def say(text: str) -> None:
    print(f"\n{BOLD}{text}{OFF}", flush=True)


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else name


def spawn(args: list[str], log_path: pathlib.Path, stdout: int | None = None) -> subprocess.Popen[str]:
    with open(log_path, "w") as log:
        out = log if stdout is None else stdout
        return subprocess.Popen(args, stdout=out, stderr=log, text=True)


@contextlib.contextmanager
def cluster(tmp: pathlib.Path) -> Iterator[str]:
    procs: list[subprocess.Popen[str]] = []
    try:
        db = str(tmp / "horus.db")
        master_args = ["--listen", "127.0.0.1:0", "--db", db, "--policy", "horus", "--tick-s", "0.5"]
        master_args += ["--http-listen", "127.0.0.1:0"]
        master = spawn([tool("horus-master"), *master_args], tmp / "master.log", subprocess.PIPE)
        procs.append(master)
        assert master.stdout is not None
        line = master.stdout.readline()
        match = re.search(r"listening on (\S+)", line)
        if not match:
            raise SystemExit(f"demo: the master did not start: {line!r}; see {tmp / 'master.log'}")
        addr = match.group(1)
        dashboard = re.search(r"dashboard on (\S+)", master.stdout.readline())
        if dashboard:
            say(f"Web dashboard (while the demo runs): {dashboard.group(1)}")
        for name in ("worker-1", "worker-2"):
            worker_args = ["--master", addr, "--name", name, "--fake-gpus", "4xV100"]
            worker_args += ["--state-dir", str(tmp / name)]
            procs.append(spawn([tool("horus-worker"), *worker_args], tmp / f"{name}.log"))
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def workload() -> list[JobSpec]:
    trace = resources.files("horus_core") / "data" / "traces" / "physical_small_test.trace"
    with resources.as_file(trace) as path:
        jobs = load_trace(path)[:JOBS]
    lo, hi = SECONDS_PER_JOB
    steps = [j.total_steps for j in jobs]
    smin, smax = min(steps), max(steps)
    specs = []
    for i, j in enumerate(jobs):
        frac = 0.0 if smax == smin else (j.total_steps - smin) / (smax - smin)
        seconds = lo + (hi - lo) * frac
        n_steps = 100
        specs.append(
            JobSpec(
                command=(
                    sys.executable,
                    "-m",
                    "horus_core.workload",
                    "--job-type",
                    j.job_type,
                    "--steps",
                    str(n_steps),
                    "--steps-per-s",
                    f"{n_steps / seconds:.2f}",
                ),
                gpus=min(j.gpus, 4),
                name=f"demo-{i:02d}",
                job_type=j.job_type,
            )
        )
    return specs


def hctl(addr: str, *args: str) -> None:
    subprocess.run([tool("hctl"), "--master", addr, *args], check=False)


async def run_workload(addr: str) -> float:
    async with HorusClient.connect(addr) as client:
        deadline = time.monotonic() + 30
        while len([n for n in await client.nodes() if n.state.value == "READY"]) < 2:
            if time.monotonic() > deadline:
                raise SystemExit("demo: workers did not register within 30 s")
            await asyncio.sleep(0.2)
        specs = workload()
        start = time.monotonic()
        jobs = [await client.submit(s) for s in specs]
        print(f"submitted {len(jobs)} jobs ({sum(s.gpus for s in specs)} GPUs asked, the cluster has 8)")
        sharing = await wait_for_sharing(client)
        say("Where the jobs run now (hctl gpus): several jobs share a GPU when the pair is compatible")
        hctl(addr, "gpus")
        if not sharing:
            print(f"{DIM}(every job was placed without sharing a GPU){OFF}")
        results = [await client.wait(j.id, timeout=240) for j in jobs]
        elapsed = time.monotonic() - start
        failed = [j for j in results if j.state is not JobState.SUCCEEDED]
        if failed:
            raise SystemExit(f"demo: {len(failed)} job(s) did not succeed: {[j.id for j in failed]}")
        slowest = min(j.predicted_slowdown for j in results)
        floors = sorted({j.spec.min_speed for j in results})
        say(
            f"Speed floor: every job got the cluster's default floor {', '.join(f'{f:g}' for f in floors)}x; "
            f"the slowest placement was predicted at {slowest:.2f}x of solo (never below the floor)"
        )
        return elapsed


async def wait_for_sharing(client: HorusClient) -> bool:
    """Wait on placements, not on a clock: until a GPU runs two or more jobs and the workers
    have reported every placed job's own GPU use (so the table shows real numbers); False once
    no job waits any more and none shares (nothing left that could)."""
    deadline = time.monotonic() + START_WAIT_S
    while True:
        gpus = await client.gpus()
        placed = [g for g in gpus if g.job_ids]
        shared = any(len(g.job_ids) >= 2 for g in placed)
        measured = all(len(g.jobs) == len(g.job_ids) for g in placed)
        if shared and measured:
            return True
        if placed and not shared and not await client.list(states=(JobState.PENDING,)):
            return False
        if not placed and time.monotonic() > deadline:
            raise SystemExit(f"demo: nothing was placed in {START_WAIT_S:.0f} s; see the master's log")
        await asyncio.sleep(0.3)


def compile_ahead() -> None:
    """Run the policy once on a few jobs of the sample trace in this process: on a fresh clone
    that compiles the packing kernels (Numba, cached on disk), so the master's first scheduling
    pass loads them instead of compiling while the demo waits."""
    from horus_core.sim import simulate

    say("Preparing the scheduler's compiled kernels (the first run compiles them: about 20 s)")
    start = time.monotonic()
    trace = resources.files("horus_core") / "data" / "traces" / "physical_small_test.trace"
    with resources.as_file(trace) as path:
        simulate(load_trace(path)[:JOBS], "v100:8", "horus")
    print(f"ready in {time.monotonic() - start:.1f} s")


def compare_policies() -> None:
    from horus_core.sim import SimConfig, compare, simulate, summarize

    trace = resources.files("horus_core") / "data" / "traces" / "msr_seed0_2869ce_cap.trace"
    with resources.as_file(trace) as path:
        results = {name: summarize(r) for name, r in compare(str(path), "v100:16", list(POLICIES)).items()}
        floor = SimConfig(min_speed=DEFAULT_MIN_SPEED)
        results["floor"] = summarize(simulate(str(path), "v100:16", "horus", config=floor))
    print(f"{'policy':<44} {'avg JCT':>8} {'work per busy GPU':>18} {'jobs slowed <0.8x':>18}")
    labels = {**POLICIES, "floor": f"Horus with the default floor ({DEFAULT_MIN_SPEED:g}x of solo)"}
    for name, label in labels.items():
        m = results[name]
        print(f"{label:<44} {m['avg_jct_h']:>6.1f} h {m['useful_per_busy']:>17.2f}x {m['slow_share']:>17.0%}")
    print(f"{'Gavel best policy (its own simulator)':<44} {25.0:>6.1f} h")
    fifo, blind, horus = (results[n]["avg_jct_h"] for n in POLICIES)
    say(
        f"Horus finishes jobs {fifo / horus:.1f}x sooner than exclusive GPUs and {blind / horus:.0f}x sooner "
        "than interference-blind packing:\nit shares a GPU only when the measured pair speeds say sharing "
        "beats taking turns."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="A one-minute tour of Horus on an embedded cluster.")
    parser.add_argument("--skip-comparison", action="store_true", help="leave out the simulated comparison")
    args = parser.parse_args()
    print(__doc__)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="horus-demo-"))
    try:
        compile_ahead()
        say("Starting a master and two workers (4 simulated V100 each) on 127.0.0.1")
        with cluster(tmp) as addr:
            elapsed = asyncio.run(run_workload(addr))
            say(f"All jobs finished in {elapsed:.0f} s. Where each one ran (hctl jobs):")
            hctl(addr, "jobs", "--all")
            hctl(addr, "nodes")
        if args.skip_comparison:
            return
        say("Why it matters: Gavel's 533-job Philly trace on 16 V100, same policies, simulated")
        print(
            f"{DIM}(Gavel's own simulator: exclusive fifo 84.1 h avg JCT, interference-blind packing "
            f"151.7 h, its best policy 25.0 h){OFF}"
        )
        compare_policies()
    finally:
        if os.environ.get("HORUS_DEMO_KEEP"):
            print(f"demo state kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
