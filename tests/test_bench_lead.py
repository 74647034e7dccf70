"""The lead benchmark (bench/lead.py, issue 33's targets) runs on a small trace, prints one line
per target, and says when Gavel's trace is missing (the figures are in docs/evaluation.md)."""

from __future__ import annotations

from pathlib import Path

from tests.benchrun import bench


def test_lead_prints_a_line_per_target(tmp_path: Path) -> None:
    kinds = ["ResNet-50 (batch size 16)", "LM (batch size 5)", "ResNet-18 (batch size 32)", "A3C"]
    rows = [f"{kinds[i % 4]},{1 + i % 2},{20_000 + 3_000 * i},{300 * i}" for i in range(12)]
    trace = tmp_path / "t.csv"
    trace.write_text("job_type,gpus,total_steps,arrival_s\n" + "\n".join(rows) + "\n")
    others = "fifo,gavel-las-perf,horus-las"
    lines = bench("lead.py", "--trace", str(trace), "--traces", str(tmp_path / "none"),
                  "--policies", f"horus,{others}", "--batch", "8")  # fmt: skip
    by = {(x["target"], x.get("trace")): x for x in lines}
    assert [x["target"] for x in lines] == ["mixed", "mixed", "batch", "homogeneous"]
    mixed = by["mixed", "t"]
    assert set(mixed["avg_jct_h"]) == {"horus", *others.split(",")}  # (horus is not its own rival)
    best = mixed["best"]
    assert mixed["best_avg_jct_h"] == min(v for k, v in mixed["avg_jct_h"].items() if k != "horus")
    assert mixed["ratio"] == round(mixed["horus_avg_jct_h"] / mixed["best_avg_jct_h"], 3)
    assert mixed["met"] == (mixed["ratio"] <= 0.97) and mixed["best_p95_h"] == mixed["p95_jct_h"][best]
    assert "skipped" in by["mixed", "msr_seed0_e13805_400_cap.trace"]
    batch = by["batch", None]
    assert batch["jobs"] == 8 and set(batch["makespan_h"]) == {
        "horus (jct)",
        "gavel-makespan-perf",
        "optimus",
        "fifo",
    }
    assert batch["best_makespan_h"] == min(v for k, v in batch["makespan_h"].items() if k != "horus (jct)")
    assert batch["jct_cost"] == round(batch["horus_avg_jct_h"] / batch["avg_jct_h"]["horus (jct)"], 3)
    home = by["homogeneous", None]
    assert home["horus_avg_jct_h"] > 0 and home["met"] == (round(home["horus_avg_jct_h"], 2) <= 11.52)


def test_lead_floor_target_compares_the_default_floor_with_none(tmp_path: Path) -> None:
    kinds = ["ResNet-50 (batch size 16)", "LM (batch size 5)", "ResNet-18 (batch size 32)", "A3C"]
    rows = [f"{kinds[i % 4]},{1 + i % 2},{20_000 + 3_000 * i},{300 * i}" for i in range(12)]
    trace = tmp_path / "t.csv"
    trace.write_text("job_type,gpus,total_steps,arrival_s\n" + "\n".join(rows) + "\n")
    lines = bench("lead.py", "--trace", str(trace), "--traces", str(tmp_path / "none"), "--targets", "floor")
    e13805 = "msr_seed0_e13805_400_cap.trace"
    assert [(x["trace"], x["cluster"]) for x in lines] == [
        ("t", "v100:16"), ("t", "k80:8,p100:8,v100:8"),
        (e13805, "v100:16"), (e13805, "k80:8,p100:8,v100:8"),
    ]  # fmt: skip
    assert all("skipped" in x for x in lines[2:])
    for line in lines[:2]:
        assert line["floor"] == 0.7 and set(line["worst_queue_h"]) == {"1gpu", "2gpu"}
        for b in line["worst_queue_h"].values():
            assert b["met"] == (b["floor"] <= 1.1 * b["none"] + 1.0)
        avg = line["avg_jct_h"]
        assert line["avg_met"] == (avg["floor"] <= avg["none"])
        assert line["met"] == (line["queue_met"] and line["p99_met"] and line["avg_met"])
