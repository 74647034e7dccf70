"""``horus-sim`` through a real subprocess, and its answers to bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).parent / "horus-sim"
TRACE = REPO / "horus_core" / "data" / "traces" / "physical_small_test.trace"

pytestmark = pytest.mark.skipif(not EXE.exists(), reason="horus-sim is not installed in this environment")


def horus_sim(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def test_json_comparison_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = horus_sim("--trace", TRACE, "--cluster", "v100:8", "--policies", "fifo", "--json", "--out", out)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert list(metrics) == ["fifo"]
    fifo = metrics["fifo"]
    assert fifo["jobs"] == 20 and fifo["unfinished"] == 0
    assert 0 < fifo["avg_jct_h"] <= fifo["makespan_h"]
    assert json.loads((out / "metrics.json").read_text()) == metrics
    for png in ("jct_cdf.png", "utilisation.png", "speed_hist.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert "[" not in proc.stderr  # no progress bar when stderr is not a TTY


def test_table_for_a_synthetic_trace(tmp_path: Path) -> None:
    proc = horus_sim(
        "--trace",
        "synthetic:jobs=40,rate=2",
        "--seed",
        "4",
        "--cluster",
        "v100:16",
        "--policies",
        "fifo",
        "--progress",
    )
    assert proc.returncode == 0, proc.stderr
    header, _rule, row = proc.stdout.splitlines()
    assert header.split()[:3] == ["policy", "avg", "JCT"] and row.startswith("fifo")
    assert "40/40 jobs" in proc.stderr


def test_unknown_policy_lists_the_valid_names() -> None:
    proc = horus_sim("--trace", TRACE, "--cluster", "v100:8", "--policies", "fifo,nonesuch")
    assert proc.returncode == 2
    assert "unknown policy 'nonesuch'" in proc.stderr and "fifo" in proc.stderr
    assert proc.stdout == ""


def test_bad_cluster_spec() -> None:
    proc = horus_sim("--trace", TRACE, "--cluster", "v100=8", "--policies", "fifo")
    assert proc.returncode == 2
    assert "bad cluster spec part 'v100=8'" in proc.stderr


def test_malformed_trace_line_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.csv"
    bad.write_text("job_type,gpus,total_steps,arrival_s\nA3C,1,100,0\nA3C,two,100,5\n")
    proc = horus_sim("--trace", bad, "--cluster", "v100:8", "--policies", "fifo")
    assert proc.returncode == 2
    assert "jobs.csv:3: gpus: expected a number, got 'two'" in proc.stderr


def test_missing_arguments_exit_2() -> None:
    proc = horus_sim("--cluster", "v100:8")
    assert proc.returncode == 2 and "--trace" in proc.stderr


def test_bad_option_value_exit_2() -> None:
    proc = horus_sim("--trace", TRACE, "--cluster", "v100:8", "--restart-cost-s", "-5")
    assert proc.returncode == 2 and "must not be negative" in proc.stderr


IDLE_POLICY = """
from horus_core.model import Wait
from horus_core.policies import register


class Idle:
    name = "idle"

    def decide(self, snapshot, now):
        return [Wait(j.id, "never placed", "Resources") for j in snapshot.pending()]


register("idle", lambda _model: Idle())
"""


def test_a_policy_that_finishes_nothing_is_a_failure_not_a_zero(tmp_path: Path) -> None:
    """(Issue 39: 0 of 533 jobs finished read as a success with 0.00 h average.)"""
    module = tmp_path / "idle.py"
    module.write_text(IDLE_POLICY)
    base = ("--trace", TRACE, "--cluster", "v100:8", "--policy-module", module, "--no-plots")
    proc = horus_sim(*base, "--policies", "fifo,idle")
    assert proc.returncode == 1, proc.stderr
    _header, _rule, fifo, idle, *notes = proc.stdout.splitlines()
    assert fifo.split()[0] == "fifo" and idle.split()[:2] == ["idle", "FAILED"]
    assert idle.split()[2] == "-"  # no average JCT, where 0.00 read as the best
    assert notes == ["idle FAILED: it finished none of the 20 jobs (no completion times)"]
    assert "horus-sim: idle finished none of the 20 jobs: failed" in proc.stderr
    proc = horus_sim(*base, "--policies", "idle", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["idle"]["avg_jct_h"] is None
