"""Teams in the simulator: the seeded split, per-team figures, and ``horus-sim --queues --teams``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from horus_core.errors import InvalidArgument
from horus_core.policies import make_policy
from horus_core.queues import QueuedPolicy, load_config
from horus_core.sim import simulate
from horus_core.sim.teams import assign_teams, parse_teams, team_figures
from horus_core.sim.traces import TraceJob

REPO = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "horus-sim"
TRACE = REPO / "horus_core" / "data" / "traces" / "physical_small_test.trace"
QUEUES = REPO / "studies" / "queues" / "two_teams.toml"


def test_parse_teams() -> None:
    assert parse_teams("a:0.8, b:0.2") == {"a": 0.8, "b": 0.2}
    for bad in ("", "a:0", "a:x", "a:1,a:2", ":1", "a:inf"):
        with pytest.raises(InvalidArgument):
            parse_teams(bad)


def test_split_is_seeded_and_round_robin() -> None:
    jobs = [TraceJob("ResNet-18 (batch size 32)", 1, 100, float(i)) for i in range(200)]
    one = assign_teams(jobs, {"a": 0.8, "b": 0.2}, seed=3, users=2)
    assert one == assign_teams(jobs, {"a": 0.8, "b": 0.2}, seed=3, users=2)
    assert one != assign_teams(jobs, {"a": 0.8, "b": 0.2}, seed=4, users=2)
    share_a = sum(j.queue == "a" for j in one) / len(one)
    assert 0.7 < share_a < 0.9
    a_users = [j.owner for j in one if j.queue == "a"]
    assert a_users[:4] == ["a-u0", "a-u1", "a-u0", "a-u1"]


def test_quotas_give_the_small_team_its_share_in_a_flood() -> None:
    # Team a floods 8 GPUs with 40 long jobs at t=0; team b's 4 jobs come a little later.
    flood = [TraceJob("ResNet-18 (batch size 32)", 1, 20000, 0.0, owner="a-u0", queue="a") for _ in range(40)]
    late = [TraceJob("ResNet-18 (batch size 32)", 1, 20000, 600.0, owner="b-u0", queue="b") for _ in range(4)]
    jct = {}
    for label, policy in (
        ("none", make_policy("fifo")),
        ("quotas", QueuedPolicy(make_policy("fifo"), load_config(str(QUEUES)))),
    ):
        result = simulate(flood + late, "v100:8", policy)
        jct[label] = {f.team: f.avg_jct_h for f in team_figures(result)}
        assert sum(f.share for f in team_figures(result)) == pytest.approx(1.0)
    assert jct["quotas"]["b"] < jct["none"]["b"] / 2  # b no longer queues behind a's flood


@pytest.mark.skipif(not EXE.exists(), reason="horus-sim is not installed in this environment")
def test_cli_runs_teams_with_queues() -> None:
    args = [str(EXE), "--trace", str(TRACE), "--cluster", "v100:8", "--policies", "fifo", "--json"]
    proc = subprocess.run(
        [*args, "--teams", "a:0.5,b:0.5", "--queues", str(QUEUES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    fifo = json.loads(proc.stdout)["fifo"]
    assert fifo["team_a_share"] + fifo["team_b_share"] == pytest.approx(1.0, abs=1e-3)
    bad = subprocess.run(
        [*args, "--teams", "a:1,c:1", "--queues", str(QUEUES)], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "team(s) c are not queues" in bad.stderr
