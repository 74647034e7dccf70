"""Nodes out of service on a live cluster: cordon, drain with a timeout, GPU quarantine after an
injected Xid, and the pending-reason codes and queue positions ``hctl`` shows (docs/nodes.md)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState, NodeState
from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(240)


def spec(seconds: float, name: str) -> JobSpec:
    return JobSpec(command=tuple(workload_cmd(seconds)), gpus=1, name=name)


def job_json(c: LocalCluster, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = c.hctl_json("job", job_id)
    return found


def node_json(c: LocalCluster, name: str) -> dict[str, Any]:
    return next(n for n in c.hctl_json("nodes") if n["name"] == name)


@pytest.fixture
def two_nodes(tmp_path: pathlib.Path) -> Any:
    c = LocalCluster(tmp_path)
    try:
        c.start_master()
        c.start_worker("n1", gpus="1")
        c.start_worker("n2", gpus="1")
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()


def test_cordon_keeps_new_work_off_and_survives_a_master_restart(two_nodes: LocalCluster) -> None:
    c = two_nodes
    c.hctl("cordon", "n1")
    assert node_json(c, "n1")["state"] == "CORDONED"
    with SyncHorusClient.connect(c.addr) as client:
        a = client.submit(spec(30.0, "a"))
        b = client.submit(spec(30.0, "b"))
        until(
            lambda: client.get(a.id).state is JobState.RUNNING or client.get(b.id).state is JobState.RUNNING
        )
        running = [j for j in (client.get(a.id), client.get(b.id)) if j.state.active]
        assert [j.node for j in running] == ["n2"]
        waiting = next(j for j in (a, b) if j.id != running[0].id)
        # the idle GPU it could use is on the cordoned node: the code says so, in -o json too
        row = until(lambda: (r := job_json(c, waiting.id))["reason_code"] == "NodeCordoned" and r)
        assert row["state"] == "PENDING" and row["reason"]
        queue = c.hctl_json("queue")
        assert [(q["id"], q["queue"], q["position"]) for q in queue] == [(waiting.id, "default", 1)]
        c.hctl("uncordon", "n1")
        assert until(lambda: client.get(waiting.id).node == "n1")
        assert client.get(running[0].id).attempt == 1  # nothing moved the one already running
        c.hctl("cordon", "n2")
        c.kill_master()
        c.start_master()
        # after the restart, once both workers are back: n2 still cordoned, n1 in service
        want = {"n1": "READY", "n2": "CORDONED"}
        until(lambda: {n["name"]: n["state"] for n in c.hctl_json("nodes")} == want)
        assert {n.name: n.state for n in client.nodes()} == {"n1": NodeState.READY, "n2": NodeState.CORDONED}


def test_drain_with_timeout_preempts_once_and_the_job_runs_elsewhere(two_nodes: LocalCluster) -> None:
    c = two_nodes
    with SyncHorusClient.connect(c.addr) as client:
        job = client.submit(spec(8.0, "long"))
        first = until(lambda: (j := client.get(job.id)).state is JobState.RUNNING and j)
        other = "n2" if first.node == "n1" else "n1"
        c.hctl("drain", first.node, "--timeout", "1")
        assert node_json(c, first.node)["state"] == "DRAINING"
        moved = until(lambda: (j := client.get(job.id)).node == other and j.state.active and j)
        assert moved.attempt == 2
        done = client.wait(job.id, timeout=60)
        assert done.state is JobState.SUCCEEDED and done.attempt == 2 and done.node == other


def test_injected_xid_quarantines_the_gpu_until_uncordon(tmp_path: pathlib.Path) -> None:
    faults = tmp_path / "faults"
    c = LocalCluster(tmp_path)
    try:
        c.start_master()
        c.start_worker("n1", "2", "--fake-gpu-faults", str(faults))
        c.wait_nodes(1)
        with faults.open("a") as f:
            f.write("0 xid 79\n")
        bad = until(lambda: next((g for g in c.hctl_json("gpus") if g["quarantine"]), None))
        assert bad["index"] == 0 and bad["quarantine"] == "Xid 79" and not bad["healthy"]
        assert node_json(c, "n1")["quarantined"] == 1
        with SyncHorusClient.connect(c.addr) as client:
            a = client.submit(spec(30.0, "a"))
            b = client.submit(spec(30.0, "b"))
            ran = until(
                lambda: next((j for j in (client.get(a.id), client.get(b.id)) if j.state.active), None)
            )
            assert ran.gpus != (bad["uuid"],)
            waiting = b if ran.id == a.id else a
            until(lambda: client.get(waiting.id).reason_code == "NodeCordoned")
            c.hctl("uncordon", "n1", "--gpu", bad["uuid"])
            placed = until(lambda: (j := client.get(waiting.id)).state.active and j)
            assert placed.gpus == (bad["uuid"],)
    finally:
        c.stop()
