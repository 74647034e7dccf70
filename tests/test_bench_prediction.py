"""The prediction and cold-start benchmarks run and say what they measure (small sizes; the figures
themselves are in docs/prediction.md and docs/evaluation.md)."""

from __future__ import annotations

from pathlib import Path

from tests.benchrun import bench


def test_prediction_zero_shot_on_the_h200_measurements() -> None:
    lines = {
        (x["what"], x.get("model"), x.get("features_on")): x for x in bench("prediction.py", "--what", "h200")
    }
    mean, today, cards = (lines["h200_pairs", m, None] for m in ("mean", "today", "cards"))
    assert today["pairs"] == cards["pairs"] == 36
    assert cards["mae"] < mean["mae"] < today["mae"]  # the claim of docs/prediction.md
    assert today["bias"] < cards["bias"] <= 0.0  # today pessimistic; cards much less so
    util = lines["h200_util", None, "v100"]
    assert len(util["predicted"]) == 6 and util["util_rmsle"] > 0
    assert lines["h200_memory", None, None]["mean_abs_log_ratio"] > 0


def test_cold_start_prints_every_run_and_the_ratios(tmp_path: Path) -> None:
    kinds = ["ResNet-50 (batch size 16)", "LM (batch size 5)", "ResNet-18 (batch size 32)", "A3C"]
    rows = [f"{kinds[i % 4]},1,{20_000 + 3_000 * i},{300 * i}" for i in range(12)]
    trace = tmp_path / "t.csv"
    trace.write_text("job_type,gpus,total_steps,arrival_s\n" + "\n".join(rows) + "\n")
    lines = bench(
        "cold_start.py", "--trace", str(trace), "--clusters", "v100:4", "--runs", "warm", "cards", "blind"
    )
    runs = {x["run"]: x for x in lines if "run" in x}
    assert set(runs) == {"warm", "cards", "blind"}
    assert all(x["unfinished"] == 0 and x["avg_jct_h"] > 0 for x in runs.values())
    assert runs["warm"]["observations"] == 0 < runs["cards"]["observations"]
    ratios = {x["ratio"]: x["avg_jct"] for x in lines if "ratio" in x}
    assert ratios["cards/warm"] == round(runs["cards"]["avg_jct_h"] / runs["warm"]["avg_jct_h"], 3)
