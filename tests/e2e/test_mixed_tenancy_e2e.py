"""Tenancy on mixed GPU types, live (issue 29, item 1): master, three workers (4 V100, 4 V100,
4 K80) and hctl as real processes, with the queues file of docs/queues.md. Team A fills all 8
V100s (borrowing 2); team B's V100-only jobs then start by reclaim, and a job of the high class
by preemption, within a few passes plus the grace period, while the K80s stay idle."""

from __future__ import annotations

import pathlib
import re
import time

import pytest

from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(300)

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "queues.md"
TICK_S, GRACE_S, SLACK_S = 0.2, 2.0, 8.0  # slack: a fresh process's start and a heartbeat


def submit(cluster: LocalCluster, token: str, *flags: str) -> str:
    cmd = workload_cmd(120.0, steps=600)
    return cluster.hctl("--token", token, "submit", "--gpus", "1", "--grace-s", str(GRACE_S), *flags,
                        "--", *cmd).stdout.strip()  # fmt: skip


def state(cluster: LocalCluster, job_id: str) -> dict[str, object]:
    job: dict[str, object] = cluster.hctl_json("--token", "tok-root", "get", "job", job_id)
    return job


def running(cluster: LocalCluster, ids: list[str]) -> bool:
    return all(state(cluster, j)["state"] == "RUNNING" for j in ids)


def test_reclaim_and_priority_on_v100s_while_k80s_idle(cluster: LocalCluster, tmp_path: pathlib.Path) -> None:
    block = re.search(r"```toml\n(.*?)```", DOCS.read_text(), re.S)
    assert block is not None
    (tmp_path / "queues.toml").write_text(block.group(1))
    (tmp_path / "tokens").write_text("tok-a alice\ntok-b bob\ntok-c carol\ntok-root root admin\n")
    cluster.policy = "horus"
    cluster.start_master("--queues", str(tmp_path / "queues.toml"), "--auth-tokens", str(tmp_path / "tokens"),
                         "--join-token", "join")  # fmt: skip
    for name, gpus in (("v1", "4xV100"), ("v2", "4xV100"), ("k1", "4xK80")):
        cluster.start_worker(name, gpus, "--join-token", "join")
    until(
        lambda: (
            len([n for n in cluster.hctl_json("--token", "tok-root", "nodes") if n["state"] == "READY"]) == 3
        )
    )

    team_a = [submit(cluster, "tok-a", "--gpu-type", "v100", "--exclusive") for _ in range(8)]
    until(lambda: running(cluster, team_a), timeout=60)

    t0 = time.monotonic()
    team_b = [submit(cluster, "tok-c", "--gpu-type", "v100", "--exclusive") for _ in range(2)]
    until(lambda: running(cluster, team_b), timeout=60)
    took = time.monotonic() - t0
    assert took <= 4 * TICK_S + GRACE_S + SLACK_S, took
    reclaimed = [j for j in team_a if state(cluster, j)["state"] == "PENDING"]
    assert len(reclaimed) == 2, [state(cluster, j) for j in team_a]  # the 2 borrowed V100s
    assert "queue team-b reclaims its quota" in str(state(cluster, reclaimed[0])["last_preemption"])

    t0 = time.monotonic()
    high = submit(cluster, "tok-b", "--gpu-type", "v100", "--exclusive", "--priority-class", "high")
    until(lambda: running(cluster, [high]), timeout=60)
    took = time.monotonic() - t0
    assert took <= 4 * TICK_S + GRACE_S + SLACK_S, took

    gpus = cluster.hctl_json("--token", "tok-root", "gpus")
    assert all(not g["job_ids"] for g in gpus if g["node"] == "k1")  # the K80s never stood in
    for j in [*team_a, *team_b, high]:
        cluster.hctl("--token", "tok-root", "cancel", j)
