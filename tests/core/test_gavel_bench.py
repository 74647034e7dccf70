"""``bench/policy_time.py`` still runs and reports what it says (tiny size; no timing judged)."""

from __future__ import annotations

from tests.benchrun import bench


def test_policy_time_prints_one_line_per_policy_and_the_ungrouped_reference() -> None:
    args = ("--sizes", "32", "--repeat", "1", "--policies", "gavel-las-perf", "gavel-las-packed", "fifo")
    lines = bench("policy_time.py", *args)
    timed = {x["policy"]: x for x in lines if "policy" in x}
    assert set(timed) == {"gavel-las-perf", "gavel-las-packed", "fifo", "gavel-las-perf (ungrouped LP)"}
    assert all(x["bench"] == "policy_time" and x["jobs"] == 32 and x["gpus"] == 24 for x in timed.values())
    assert all(x["ms"] > 0 for x in timed.values())
    (ratio,) = [x for x in lines if x.get("ratio") == "ungrouped/grouped cpu"]
    grouped, ungrouped = timed["gavel-las-perf"]["cpu_ms"], timed["gavel-las-perf (ungrouped LP)"]["cpu_ms"]
    assert abs(ratio["value"] - ungrouped / grouped) <= 0.02 * ratio["value"] + 0.01
