"""Horus pilots on a real Slurm (slurmctld + slurmd of scripts/slurm-dev.sh, 4 fake GPUs):
registered with the GPUs Slurm gave them, two on one node splitting its GPUs, jobs placed through
Horus, the warning signal draining a pilot, walltime expiry and scancel mid-job re-queueing what
ran there, and the adaptive pool growing with the queue and shrinking when idle."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from horus_core.client import SyncHorusClient
from horus_core.model import Job, JobSpec, JobState
from tests.e2e.cluster import BIN, LocalCluster, stop_processes, workload_cmd
from tests.slurm.devslurm import DevSlurm

WARN, STOP = "30", "28"  # the warning's lead and the stop margin: a warned pilot drains in 2 s


def up(slurm: DevSlurm, master: LocalCluster, *more: str, nodes: int = 1) -> list[str]:
    out = slurm.horus_slurm(*pilot_args(slurm, master), "--nodes", str(nodes), *more).stdout
    ids = [line.split()[2] for line in out.splitlines() if line.startswith("submitted pilot")]
    assert len(ids) == nodes, out
    return ids


def pilot_args(slurm: DevSlurm, master: LocalCluster) -> list[str]:
    return [
        "up",
        "--master",
        master.addr,
        "--gpus-per-node",
        "2",
        "--time",
        "10",
        "--warn-s",
        WARN,
        "--stop-s",
        STOP,
        "--output",
        str(slurm.root / "pilot-%j.out"),
        "--worker-args",
        "--fake-gpus 4 --grace-s 2",
    ]


def wait_for(what: str, fn: Callable[[], Any], timeout: float, logs: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s\n{logs()}")


def nodes_by_name(master: LocalCluster) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in master.hctl_json("nodes")}


def ready_pilots(master: LocalCluster, ids: list[str]) -> dict[str, dict[str, Any]] | None:
    nodes = nodes_by_name(master)
    mine = {j: nodes.get(f"slurm-{j}") for j in ids}
    return mine if all(n is not None and n["state"] == "READY" for n in mine.values()) else None  # type: ignore[misc]


def job_where(client: SyncHorusClient, job_id: str, attempt: int, *states: JobState) -> Job | None:
    """The job once its attempt ``attempt`` (or a later one) is in one of ``states`` (default:
    RUNNING, or already SUCCEEDED: a loaded machine may poll past a short run)."""
    job = client.get(job_id)
    return job if job.attempt >= attempt and job.state in (states or _STARTED) else None


_STARTED = (JobState.RUNNING, JobState.SUCCEEDED)


def test_two_pilots_split_a_node_run_jobs_and_survive_scancel(slurm: DevSlurm, master: LocalCluster) -> None:
    logs = lambda: master.logs() + slurm.logs()  # noqa: E731
    ids = up(slurm, master, nodes=2)
    pilots = wait_for("both pilots READY", lambda: ready_pilots(master, ids), 120, logs)
    # Each has the 2 GPUs Slurm gave it (gres gpu:fake IDX 0-1 and 2-3): one node's 4 split in two.
    indices = sorted(tuple(sorted(g["index"] for g in n["gpus"])) for n in pilots.values())
    assert indices == [(0, 1), (2, 3)], pilots
    uuids = [g["uuid"] for n in pilots.values() for g in n["gpus"]]
    assert len(set(uuids)) == 4
    for job_id, node in pilots.items():
        assert node["slurm"]["job_id"] == job_id
        assert 0 < node["slurm"]["end_time"] - time.time() <= 600
    table = master.hctl("nodes").stdout
    assert "SLURM JOB" in table and all(j in table for j in ids), table
    status = slurm.horus_slurm("status").stdout
    assert all(f"slurm-{j}" in status for j in ids) and "RUNNING" in status, status

    with SyncHorusClient.connect(master.addr) as client:
        quick = client.submit(JobSpec(command=tuple(workload_cmd(1.0)), gpus=2, name="quick"))
        assert client.wait(quick.id, timeout=120).state is JobState.SUCCEEDED
        long = client.submit(JobSpec(command=tuple(workload_cmd(4.0)), gpus=2, name="long", grace_s=1))
        first = wait_for("long running", lambda: job_where(client, long.id, 1, JobState.RUNNING), 60, logs)
        victim = first.node.removeprefix("slurm-")
        slurm.run("scancel", victim)  # SIGTERM to the pilot and its job's processes
        again = wait_for("long re-run elsewhere", lambda: job_where(client, long.id, 2), 60, logs)
        assert again.node != first.node and again.node.removeprefix("slurm-") in ids
        done = client.wait(long.id, timeout=120)
        assert done.state is JobState.SUCCEEDED and done.attempt == 2
    slurm.wait_gone([victim])
    slurm.horus_slurm("down", "--all")
    slurm.wait_gone(ids)


def test_warning_drains_then_walltime_requeues_nothing_lost(slurm: DevSlurm, master: LocalCluster) -> None:
    logs = lambda: master.logs() + slurm.logs()  # noqa: E731
    ids = up(slurm, master, nodes=2)
    wait_for("pilots READY", lambda: ready_pilots(master, ids), 120, logs)
    with SyncHorusClient.connect(master.addr) as client:
        # Long on its first two attempts (each is cut short), quick on the third.
        script = "import os, time; time.sleep(120 if int(os.environ['HORUS_ATTEMPT']) < 3 else 0.5)"
        job = client.submit(
            JobSpec(command=(sys.executable, "-c", script), gpus=2, name="walltime", grace_s=1)
        )
        first = wait_for("job running", lambda: job_where(client, job.id, 1), 60, logs)
        warned = first.node.removeprefix("slurm-")
        # Slurm's warning, now (as --signal=B:USR1@30 would send it 30 s before the end).
        slurm.run("scancel", "--signal=USR1", "--batch", warned)
        node = wait_for(
            "the warned pilot DRAINING",
            lambda: (n := nodes_by_name(master)[first.node])["state"] == "DRAINING" and n,
            10,
            logs,
        )
        assert node["drain_deadline"] - time.time() <= 3.0
        second = wait_for("job preempted and re-run", lambda: job_where(client, job.id, 2), 60, logs)
        assert second.node != first.node
        # The other pilot's walltime runs out mid-job: Slurm signals and ends it; the job waits.
        # (slurmctld looks at time limits every 30 s: the one wait here that Slurm sets.)
        expired = second.node.removeprefix("slurm-")
        slurm.run("scontrol", "update", f"JobId={expired}", "TimeLimit=0")
        wait_for("job back in the queue", lambda: job_where(client, job.id, 2, JobState.PENDING), 60, logs)
        more = up(slurm, master)
        third = wait_for("job re-run on a new pilot", lambda: job_where(client, job.id, 3), 120, logs)
        assert third.node == f"slurm-{more[0]}"
        assert client.wait(job.id, timeout=120).state is JobState.SUCCEEDED
    slurm.wait_gone([expired])
    slurm.horus_slurm("down", "--all")
    slurm.wait_gone([*ids, *more])


def test_adaptive_pool_grows_with_the_queue_and_shrinks_when_idle(
    slurm: DevSlurm, master: LocalCluster
) -> None:
    logs = lambda: master.logs() + slurm.logs()  # noqa: E731
    args = [a for a in pilot_args(slurm, master)]
    cmd = [
        str(BIN / "horus-slurm"),
        *args,
        "--adaptive",
        "--min",
        "0",
        "--max",
        "2",
        "--idle-grace",
        "2",
        "--interval",
        "0.5",
    ]
    with open(slurm.root / "adaptive.log", "w") as out:
        pool = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=slurm.env)
    alogs = lambda: logs() + (slurm.root / "adaptive.log").read_text()  # noqa: E731
    try:
        time.sleep(1.5)
        assert slurm.active() == [], alogs()  # nothing waits: no pilot
        with SyncHorusClient.connect(master.addr) as client:
            jobs = [
                client.submit(JobSpec(command=tuple(workload_cmd(2.0)), gpus=2, name=f"a{i}"))
                for i in range(2)
            ]
            grown = wait_for("two pilots submitted", lambda: len(slurm.active()) == 2, 60, alogs)
            assert grown
            assert [client.wait(j.id, timeout=120).state for j in jobs] == [JobState.SUCCEEDED] * 2
        wait_for("idle pilots released", lambda: slurm.active() == [], 60, alogs)
    finally:
        stop_processes([pool])
    assert pool.returncode == 0, alogs()
