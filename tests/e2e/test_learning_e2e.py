"""Learning from what runs, with real processes: a pair the table calls compatible turns out bad.

Gavel's table says ResNet-18 (batch 32) and Recommendation (batch 512) share a V100 at ~1.0x
each, so ``--policy horus`` co-locates them. The simulated worker is told the truth differs
(``--sim-interference``: 0.25x each), so the jobs really crawl when paired and their progress
reports show it. The master measures both jobs alone and together, stores the pair speeds,
and, even after a restart, no longer lets the pair share a GPU: the second job waits with a
reason naming the slowdown.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, workload_cmd

pytestmark = pytest.mark.timeout(120)
A = "ResNet-18 (batch size 32)"
B = "Recommendation (batch size 512)"
TRUE_SPEED = 0.25
STEPS_PER_S = 10.0  # solo; a report every step


def spec(job_type: str, steps: int, name: str) -> JobSpec:
    extra = ("--job-type", job_type, "--log-every", "1")
    cmd = workload_cmd(steps / STEPS_PER_S, steps=steps, extra=extra)
    return JobSpec(command=tuple(cmd), gpus=1, job_type=job_type, name=name)


def until(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not met within {timeout} s")


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps({"pairs": [{"a": A, "b": B, "speed_a": TRUE_SPEED, "speed_b": TRUE_SPEED}]}))
    c = LocalCluster(tmp_path, policy="horus")
    try:
        c.start_master()
        c.start_worker("one-gpu", "1xV100", "--sim-interference", str(truth))
        c.wait_nodes(1)
        yield c
    finally:
        c.stop()


def learned_pairs(c: LocalCluster) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["job_type"], p["co_runner"]): p for prof in c.hctl_json("profiles") for p in prof["pairs"]}


def test_a_pair_observed_slowing_down_is_no_longer_colocated(cluster: LocalCluster) -> None:
    c = cluster
    with SyncHorusClient.connect(c.addr) as client:
        # 1. A runs alone for a while (its solo phase), then B joins its GPU: the table says fine.
        a = client.submit(spec(A, 45, "a-1"))
        until(lambda: b"step 25/" in b"".join(client.logs(a.id)), what="2.5 s of A alone")
        b = client.submit(spec(B, 50, "b-1"))
        placed = until(lambda: (j := client.get(b.id)).state.active and j, what="B placed")
        assert placed.gpus == client.get(a.id).gpus and placed.predicted_slowdown >= 0.9

        # Every job on the shared GPU has its own utilisation and memory (hctl top, hctl job).
        def both_measured() -> list[dict[str, Any]]:
            jobs = [j for j in c.hctl_json("top", "--once")["jobs"] if j["job_id"] in (a.id, b.id)]
            ok = len(jobs) == 2 and all(j["util_sm"] > 0 and j["mem_used_mib"] > 0 for j in jobs)
            return jobs if ok else []

        per_job = until(both_measured, what="per-job GPU use of both jobs")
        assert per_job[0]["gpu_uuid"] == per_job[1]["gpu_uuid"]
        text = c.hctl("top", "--once").stdout
        assert a.id in text and b.id in text
        shown = c.hctl("job", a.id).stdout
        assert "GPU use:" in shown and b.id in shown  # its co-runner and its own use

        # A finishes at its paired speed; B then runs alone (B's solo phase).
        done = [client.wait(j.id, timeout=60) for j in (a, b)]
        assert all(j.state is JobState.SUCCEEDED for j in done), [(j.id, j.reason) for j in done]

    # 2. The master measured both directions of the pair, and both solo throughputs.
    pairs = until(lambda: (p := learned_pairs(c)) and len(p) == 2 and p, what="learned pairs")
    for key in ((A, B), (B, A)):
        assert pairs[key]["gpu_type"] == "v100"
        assert pairs[key]["speed"] == pytest.approx(TRUE_SPEED, abs=0.05), pairs
    profiles = {p["job_type"]: p for p in c.hctl_json("profiles")}
    assert profiles[A]["co_speed"][B] == pytest.approx(TRUE_SPEED, abs=0.05)
    assert profiles[A]["solo_samples_per_s"]["v100x1"] == pytest.approx(STEPS_PER_S * 32, rel=0.05)
    assert profiles[B]["solo_samples_per_s"]["v100x1"] == pytest.approx(STEPS_PER_S * 512, rel=0.05)
    assert "Measured pair speeds" in c.hctl("profiles").stdout

    # 3. What was learned survives a restart of the master ...
    c.kill_master()
    c.start_master()
    c.wait_nodes(1)
    with SyncHorusClient.connect(c.addr) as client:
        # ... and the same pair no longer shares the GPU: B waits while A runs.
        a2 = client.submit(spec(A, 1000, "a-2"))  # runs until cancelled below, however slow the host
        until(lambda: client.get(a2.id).state is JobState.RUNNING, what="A again")
        b2 = client.submit(spec(B, 10, "b-2"))

        def judged() -> Any:
            j = client.get(b2.id)
            return (j.state is not JobState.PENDING or "scheduling pass" not in j.reason) and j

        waiting = until(judged, what="a decision on B")
        assert waiting.state is JobState.PENDING, waiting
        assert "speed" in waiting.reason and "slow" in waiting.reason, waiting.reason
        for _ in range(5):
            assert client.get(b2.id).state is JobState.PENDING
            assert all(len(g["job_ids"]) <= 1 for g in c.hctl_json("gpus"))
            time.sleep(0.2)
        for j in (b2, a2):
            client.cancel(j.id)
