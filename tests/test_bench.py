"""The benchmarks still run and say what they measure (tiny sizes; figures are not judged here:
timing belongs to the benchmarks themselves, see docs/evaluation.md and docs/placement.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.benchrun import ROOT, bench


def test_sim_scale_runs_a_small_trace_to_the_end() -> None:
    out, ref = bench("sim_scale.py", "--jobs", "400", "--gpus", "64", "--reference-jobs", "150")
    assert out["bench"] == "sim_scale" and out["jobs"] == 400 and out["gpus"] == 64
    assert out["unfinished"] == 0 and out["events"] >= 2 * 400 - 1 and out["rounds"] > 0
    assert 0 < out["decide_s"] <= out["s"] and abs(out["of_target"] - out["s"] / out["target_s"]) <= 0.001
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


def test_placement_prints_the_gang_mix_over_the_philly_reference_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()  # a tiny uncapped MSR trace: a third of its jobs span nodes
    rows = [f"A\tcmd\t-n\t1\t100\t{i}.0\t{g}" for i, g in enumerate([1, 2, 4, 8, 16, 32])]
    (tmp_path / "traces" / "msr_seed0_abcdef.trace").write_text("\n".join(rows) + "\n")
    lines = bench("placement.py", "--what", "decide", "--decide-sizes", "60x32", "--repeat", "2",
                  "--counts", "philly", "msr", "--data", str(tmp_path))  # fmt: skip
    over = {x["source"]: x["jobs_over_8"] for x in lines if x.get("what") == "gpu_counts"}
    assert over["philly"] == 0.0 and abs(over["msr"] - 2 / 6) < 1e-3
    runs = {(x["counts"], x["cluster"], x["call"]): x for x in lines if x.get("call") and "ratio" not in x}
    assert all(x["same"] for x in runs.values()) and {c for c, _, _ in runs} == {"philly", "msr"}
    ratios = [x for x in lines if x.get("ratio")]
    assert sorted((x["cluster"], x["call"]) for x in ratios) == sorted(
        (c, call) for src, c, call in runs if src == "msr"
    )
    for r in ratios:  # each ratio is the gang mix's median over the reference's, from the same run
        gang, ref = (
            runs["msr", r["cluster"], r["call"]]["cpu_ms"],
            runs["philly", r["cluster"], r["call"]]["cpu_ms"],
        )
        assert r["ratio"] == "msr/philly" and r["policy"] == "horus" and r["jobs"] == 60
        low = (gang - 0.05) / (ref + 0.05) - 1e-3  # both medians were printed rounded to 0.1 ms
        assert low <= r["cpu_ms"] and (ref <= 0.05 or r["cpu_ms"] <= (gang + 0.05) / (ref - 0.05) + 1e-3)


def test_interference_eval_quick_mode_prints_one_line_per_case_and_predictor() -> None:
    lines = bench("interference_eval.py", "--quick", "--gpu-types", "k80")
    *cases, summary = lines
    assert {(x["gpu_type"], x["hidden"], x["predictor"]) for x in cases} == {
        ("k80", h, p) for h in (0.3, 0.9) for p in ("model", "known_mean", "job_mean")
    }
    assert len(cases) == 6 and all(x["bench"] == "interference_eval" and x["seeds"] == 1 for x in cases)
    assert all(0.0 <= x["mae"] <= 1.0 and 0.0 <= x["decision_acc"] <= 1.0 for x in cases)
    hidden = {x["hidden"]: x["pairs_hidden"] for x in cases}
    assert 0 < hidden[0.3] < hidden[0.9] and abs(hidden[0.9] / hidden[0.3] - 3.0) < 0.1
    assert summary["cases"] == 2 and 0 <= summary["wins"] <= 2


def test_interference_eval_reads_another_table_and_refuses_a_gpu_type_it_lacks(tmp_path: Path) -> None:
    jobs = [f"job{i}" for i in range(6)]

    def row(i: int) -> dict[str, Any]:
        return {"null": 10.0, **{repr((b, 1)): [10.0 / (2 + i + j)] * 2 for j, b in enumerate(jobs)}}

    rows = {repr((a, 1)): row(i) for i, a in enumerate(jobs)}
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"t4": rows}))
    *cases, summary = bench(
        "interference_eval.py", "--table", str(path), "--seeds", "2", "--fractions", "0.5"
    )
    assert {x["gpu_type"] for x in cases} == {"t4"} and len(cases) == 3 and summary["cases"] == 1
    assert all(x["pairs_hidden"] == 2 * round(0.5 * 21) for x in cases)  # 21 unordered pairs of 6 jobs
    script = str(ROOT / "bench" / "interference_eval.py")
    bad = subprocess.run(
        [sys.executable, script, "--table", str(path), "--gpu-types", "k80"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "the table has pairs for ['t4'] only" in bad.stderr and not bad.stdout


def test_load_quick_reports_every_figure_for_both_runs_and_their_ratios() -> None:
    lines = bench("load.py", "--quick", "--list-calls", "5")
    counts = {x["run"]: x for x in lines if x.get("what") == "counts"}
    figs = {(x["run"], x["figure"]): x for x in lines if "figure" in x and "run" in x}
    names = {"heartbeat", "loop_lag", "idle_loop_lag", "submit", "list_jobs", "list_jobs_all", "list_nodes"}
    assert set(figs) == {(run, name) for run in ("load", "reference") for name in names}
    for f in figs.values():
        assert f["n"] > 0 and 0 <= f["p50_ms"] <= f["p99_ms"] <= f["max_ms"]
        if "target_ms" in f:
            assert f["met"] == (f["p99_ms"] <= f["target_ms"])
    for run, workers, jobs, db_jobs in (("load", 100, 1000, 10_000), ("reference", 10, 100, 1000)):
        c = counts[run]
        assert c["workers"] == c["registered"] == c["nodes"] == c["nodes_connected"] == workers
        assert c["submitted"] == figs[(run, "submit")]["n"] + c["warmup"] == jobs
        assert c["stored_jobs"] == db_jobs  # every acknowledged submission stored, beside the pre-fill
        assert 0 < figs[(run, "heartbeat")]["n"] < c["heartbeats_handled"] <= c["heartbeats"]  # (reset)
        assert c["heartbeats_handled"] >= 2 * workers  # every worker heartbeated before the load phase
    ratios = {x["figure"]: x["x"] for x in lines if x.get("ratio") == "load/reference"}
    assert set(ratios) == names
    for name, x in ratios.items():
        want = figs[("load", name)]["p99_ms"] / max(figs[("reference", name)]["p99_ms"], 1e-3)
        assert abs(x - want) <= 0.01 * want + 0.01


def test_master_pass_reports_its_phases() -> None:
    (out,) = bench("master_pass.py", "--jobs", "300", "--gpus", "64", "--repeat", "2")
    assert out["bench"] == "master_pass" and out["jobs"] == 300 and out["gpus"] == 64
    assert out["passes"] == 2 and out["first_assigned"] > 0 and out["db_read_ms"] > 0
    assert out["gc"] == "master"  # (the collector settings horus-master runs with, by default)
    assert all(out[k] >= 0 for k in ("read_ms", "decide_ms", "commit_ms", "cpu_ms"))
    assert out["decide_ms"] + out["commit_ms"] <= out["ms"] + 1.0  # phases within the whole pass


def test_reason_codes_bench_times_its_additions_against_decide() -> None:
    (out,) = bench("reason_codes.py", "--jobs", "300", "--gpus", "64", "--repeat", "2")
    assert (out["bench"], out["jobs"], out["gpus"]) == ("reason_codes", 300, 64)
    assert 0 < out["waits"] < 300  # 64 GPUs hold some of the 300 jobs, not all
    assert out["decide_ms"] > 0 and out["positions_ms"] > 0 and out["refine_ms"] > 0
    assert out["positions_ratio"] > 0 and out["refine_ratio"] > 0


def test_gang_wait_prints_the_reference_and_the_reservation_for_each_policy() -> None:
    trace = "horus_core/data/traces/msr_seed0_2869ce_cap.trace"
    args = ("--cluster", "v100:8", "--policies", "fifo,lucid", "--head", "30")
    rows = bench("gang_wait.py", "--trace", trace, *args)
    assert [(r["policy"], r["reserve"]) for r in rows] == [
        ("fifo", False), ("fifo", True), ("lucid", False), ("lucid", True),
    ]  # fmt: skip
    for r in rows:
        assert r["bench"] == "gang_wait" and r["jobs"] == 30 and r["unfinished"] == 0
        assert r["gangs"] > 0 and r["gang_avg_jct_h"] > 0 and r["avg_jct_h"] > 0


def test_cli_startup_measures_hctl_against_the_interpreter_in_one_run() -> None:
    lines = bench("cli_startup.py", "--repeat", "2")
    rows = {x["cmd"]: x for x in lines if "cmd" in x}
    assert set(rows) == {"python -c pass", "hctl --version", "hctl jobs"}
    ref = rows["python -c pass"]["wall_ms"]
    for name in ("hctl --version", "hctl jobs"):
        row = rows[name]
        assert row["n"] == 2 and row["wall_ms"] > 0
        assert abs(row["over_python_ms"] - (row["wall_ms"] - ref)) < 0.2
    (imports,) = [x for x in lines if x.get("what") == "imports"]
    assert imports["heavy"] == [] and imports["modules"] > 50


def test_floor_tradeoff_prints_each_floor_against_no_floor_in_one_run() -> None:
    lines = bench("floor_tradeoff.py", "--trace", "synthetic:jobs=80,rate=20,seed=1", "--clusters", "v100:4",
                  "--floors", "0.7")  # fmt: skip
    assert [(x["cluster"], x["floor"]) for x in lines] == [("v100:4", 0.0), ("v100:4", 0.7)]
    none, floor = lines
    assert none["jct_vs_none"] == 1.0 and floor["jct_vs_none"] == round(
        floor["avg_jct_h"] / none["avg_jct_h"], 4
    )
    assert floor["min_speed"] >= 0.7 and all(x["unfinished"] == 0 for x in lines)
