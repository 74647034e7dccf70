"""The benchmarks still run and say what they measure (tiny sizes; figures are not judged here:
timing belongs to the benchmarks themselves, see docs/evaluation.md and docs/placement.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def bench(script: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_sim_scale_runs_a_small_trace_to_the_end() -> None:
    out, ref = bench("sim_scale.py", "--jobs", "400", "--gpus", "64", "--reference-jobs", "150")
    assert out["bench"] == "sim_scale" and out["jobs"] == 400 and out["gpus"] == 64
    assert out["unfinished"] == 0 and out["events"] >= 2 * 400 - 1 and out["rounds"] > 0
    assert 0 < out["decide_s"] <= out["s"] and out["of_target"] == round(out["s"] / out["target_s"], 3)
    assert ref["what"] == "reference" and ref["jobs"] == 150 and ref["same"] is True  # fast path = plain path
    assert ref["fast_s"] > 0 and ref["plain_s"] > 0


def test_placement_decide_matches_a_fresh_policy_and_the_kernel_its_reference() -> None:
    lines = bench("placement.py", "--what", "decide", "--decide-sizes", "60x32", "--repeat", "2",
                  "--policies", "horus", "lucid")  # fmt: skip
    runs = [x for x in lines if x.get("call")]
    assert {(x["policy"], x["cluster"], x["call"]) for x in runs} == {
        (p, c, call)
        for p in ("horus", "lucid")
        for c in ("empty", "half")
        for call in ("first", "steady", "reread", "churn")
    }
    assert all(x["same"] and x["jobs"] == 60 and x["gpus"] == 32 and x["ms"] > 0 for x in runs)


def test_master_pass_reports_its_phases() -> None:
    (out,) = bench("master_pass.py", "--jobs", "300", "--gpus", "64", "--repeat", "2")
    assert out["bench"] == "master_pass" and out["jobs"] == 300 and out["gpus"] == 64
    assert out["passes"] == 2 and out["first_assigned"] > 0 and out["db_read_ms"] > 0
    assert all(out[k] >= 0 for k in ("read_ms", "decide_ms", "commit_ms", "cpu_ms"))
    assert out["decide_ms"] + out["commit_ms"] <= out["ms"] + 1.0  # phases within the whole pass
