"""Two teams' queues on a live cluster (master, worker, SDK and hctl as real processes).

Team A fills the cluster by borrowing B's idle quota; team B then submits within its quota. B's
jobs start within two scheduling passes plus the grace period, by preempting A's borrowed jobs
only; A's preempted jobs resume later with their attempt numbers incremented, and every job
succeeds.
"""

from __future__ import annotations

import pathlib
import signal
import time

import pytest

from horus_core import SyncHorusClient
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec, JobState
from horus_core.testing import queue_file, queue_table, queues_toml
from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(240)

TICK_S, GRACE_S = 0.2, 2.0
# Startup of a fresh Python process and one heartbeat: what "started" adds to the passes.
SLACK_S = 6.0

QUEUES = queues_toml(
    queue_table("team-a", {"v100": 2}, borrowing_limit=2, users=("alice",)),
    queue_table("team-b", {"v100": 2}, users=("bob",)),
)


def start(cluster: LocalCluster, tmp: pathlib.Path) -> None:
    queue_file(tmp, QUEUES)
    (tmp / "tokens").write_text("tok-a alice\ntok-b bob\n")
    cluster.start_master(
        "--queues", str(tmp / "queues.toml"), "--auth-tokens", str(tmp / "tokens"), "--join-token", "join"
    )
    cluster.start_worker("w1", "4", "--join-token", "join")
    until(lambda: cluster.hctl_json("--token", "tok-a", "nodes"))


def test_team_b_reclaims_its_quota_from_team_a(cluster: LocalCluster, tmp_path: pathlib.Path) -> None:
    start(cluster, tmp_path)
    with (
        SyncHorusClient.connect(cluster.addr, token="tok-a") as alice,
        SyncHorusClient.connect(cluster.addr, token="tok-b") as bob,
    ):
        with pytest.raises(InvalidArgument, match="may not submit to queue 'team-b'"):
            alice.submit(JobSpec(command=("true",), queue="team-b"))
        long = tuple(workload_cmd(12.0, steps=60))
        a_jobs = []
        for i in range(4):  # one at a time: a_jobs[2:] are the youngest, and borrowed
            a_jobs.append(alice.submit(JobSpec(command=long, name=f"a{i}", grace_s=GRACE_S)))
            until(lambda: alice.get(a_jobs[-1].id).state is JobState.RUNNING, timeout=30)
        usage = {q.name: q for q in alice.queues()}
        assert (usage["team-a"].used, usage["team-a"].borrowed) == (4, 2)

        t0 = time.monotonic()
        b_jobs = [bob.submit(JobSpec(command=tuple(workload_cmd(2.0)), name=f"b{i}")) for i in range(2)]
        until(lambda: all(bob.get(j.id).state is JobState.RUNNING for j in b_jobs), timeout=30)
        started_s = time.monotonic() - t0
        assert started_s <= 2 * TICK_S + GRACE_S + SLACK_S, started_s
        print(f"team B started {started_s:.2f} s after submitting (bound {2 * TICK_S + GRACE_S + SLACK_S} s)")

        states = {j.id: alice.get(j.id) for j in a_jobs}
        preempted = [
            j.id for j in a_jobs if states[j.id].attempt > 1 or states[j.id].state is JobState.PENDING
        ]
        assert preempted == [a_jobs[2].id, a_jobs[3].id]  # the borrowed (youngest) ones, no others
        assert all(states[j.id].attempt == 1 and states[j.id].state is JobState.RUNNING for j in a_jobs[:2])

        done_b = [bob.wait(j.id, timeout=60) for j in b_jobs]
        assert [j.state for j in done_b] == [JobState.SUCCEEDED] * 2
        done_a = [alice.wait(j.id, timeout=120) for j in a_jobs]
        assert [j.state for j in done_a] == [JobState.SUCCEEDED] * 4  # nothing lost
        assert [j.attempt for j in done_a] == [1, 1, 2, 2]  # resumed with attempt + 1
    table = cluster.hctl("--token", "tok-a", "queues").stdout
    assert "team-a" in table and "team-b" in table

    # SIGHUP reloads the file; a broken file is logged and the config in force kept.
    assert cluster.master is not None
    (tmp_path / "queues.toml").write_text("[queues.broken\n")
    cluster.master.send_signal(signal.SIGHUP)
    until(lambda: "keeping the configuration in force" in (tmp_path / "master.log").read_text(), timeout=30)
    (tmp_path / "queues.toml").write_text(QUEUES + queue_table("team-c", {"*": 1}))
    cluster.master.send_signal(signal.SIGHUP)
    rows = lambda: [q["name"] for q in cluster.hctl_json("--token", "tok-a", "queues")]  # noqa: E731
    until(lambda: rows() == ["team-a", "team-b", "team-c"], timeout=30)
