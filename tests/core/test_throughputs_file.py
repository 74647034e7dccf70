"""Bringing one's own table (``--throughputs FILE``): Gavel's format, zero solo throughputs meaning
"cannot run there", and every bad entry refused by name; ``horus-sim`` loading it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from horus_core.errors import InvalidArgument
from horus_core.interference import InterferenceModel
from horus_core.interference.table import INFEASIBLE, load_table, packaged_table, parse_table_text

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "docs" / "gpu-runs" / "2026-11-27-h200" / "h200_throughputs.json"
A, B = "('A (batch size 1)', 1)", "('B (batch size 2)', 1)"


def _table() -> dict[str, Any]:
    return {
        "v100": {
            A: {"null": 10.0, A: [5.0, 5.0], B: [6.0, 3.0]},
            B: {"null": 4.0, B: [2.0, 2.0], A: [3.0, 6.0]},
            "('A (batch size 1)', 2)": {"null": 18.0},
        },
        "k80": {
            A: {"null": 0.0, A: [1.0, 1.0], B: [1.0, 1.0]},  # A cannot run on a K80
            B: {"null": 2.0, B: [1.0, 1.0], A: [1.0, 1.0]},
        },
    }


def test_zero_solo_means_cannot_run_there_not_a_crash() -> None:
    table = parse_table_text(json.dumps(_table()))
    assert table.solo[("k80", "A (batch size 1)", 1)] == 0.0
    assert table.pairs[("k80", "A (batch size 1)", "B (batch size 2)")] == INFEASIBLE
    assert table.pairs[("v100", "A (batch size 1)", "B (batch size 2)")] == pytest.approx((0.6, 0.75))
    model = InterferenceModel(table)
    assert model.has_zero_solo(["k80"]) and model.solo_throughput("A (batch size 1)", 1, "k80") == 0.0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            lambda t: t["v100"][A].update(null=float("nan")),
            "throughputs['v100'][\"('A (batch size 1)', 1)\"]['null']",
        ),
        (lambda t: t["v100"][A].update(null=-1.0), "['null']"),
        (lambda t: t["v100"][A].update({B: [6.0, -3.0]}), "[\"('B (batch size 2)', 1)\"]"),
        (lambda t: t["v100"][A].update({B: [6.0]}), "[\"('B (batch size 2)', 1)\"]"),
        (lambda t: t["v100"][A].update({B: ["fast", 1.0]}), "[\"('B (batch size 2)', 1)\"]"),
        (lambda t: t["v100"][A].update(speed=1.0), "['speed']"),
        (lambda t: t["v100"].update({"('C', 0)": {"null": 1.0}}), "[\"('C', 0)\"]"),
        (lambda t: t["v100"].update({"garbage": {"null": 1.0}}), "['garbage']"),
        (lambda t: t["v100"][A].update({"('Z (batch size 9)', 1)": [1.0, 1.0]}), "('Z (batch size 9)', 1)"),
        (lambda t: t["v100"].update({A: [1.0]}), "[\"('A (batch size 1)', 1)\"]"),
        (lambda t: t["v100"][B].pop("null"), "[\"('B (batch size 2)', 1)\"]"),
        (lambda t: t.update(h100=[]), "throughputs['h100']"),
    ],
)
def test_a_bad_entry_is_refused_by_name(change: Any, named: str) -> None:
    raw = _table()
    change(raw)
    with pytest.raises(InvalidArgument) as err:
        parse_table_text(json.dumps(raw))
    assert named in str(err.value)


def test_malformed_or_empty_files_are_refused(tmp_path: Path) -> None:
    for text, message in (("{", "not valid JSON"), ("[]", "expected a JSON object"), ("{}", "expected")):
        with pytest.raises(InvalidArgument, match=message):
            parse_table_text(text)
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_table(tmp_path / "missing.json")


def test_the_packaged_table_and_the_h200_measurements_load() -> None:
    assert load_table(REPO / "horus_core" / "data" / "simulation_throughputs.json") == packaged_table()
    h200 = load_table(H200)
    assert h200.pair_gpu_types == ("h200",) and len(h200.job_types) == 6
    speeds = h200.pairs[("h200", "ResNet-50 (batch size 64)", "ResNet-50 (batch size 64)")]
    assert 0.4 < speeds[0] < 0.55


def test_horus_sim_runs_on_a_table_of_ones_own(tmp_path: Path) -> None:
    trace = tmp_path / "h200.csv"
    names = load_table(H200).job_types
    rows = [f"{name},1,2000,{60 * i}" for i, name in enumerate(names * 2)]
    trace.write_text("job_type,gpus,total_steps,arrival_s\n" + "\n".join(rows) + "\n")
    exe = Path(sys.executable).parent / "horus-sim"
    run = [
        str(exe),
        "--trace",
        str(trace),
        "--cluster",
        "h200:2",
        "--policies",
        "fifo,horus",
        "--json",
        "--no-plots",
    ]
    ok = subprocess.run([*run, "--throughputs", str(H200)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    metrics = json.loads(ok.stdout)
    assert metrics["horus"]["unfinished"] == 0 and metrics["fifo"]["jobs"] == 12
    bad = tmp_path / "bad.json"
    raw = json.loads(H200.read_text())
    raw["h200"]["('LM (batch size 20)', 1)"]["null"] = -5
    bad.write_text(json.dumps(raw))
    refused = subprocess.run([*run, "--throughputs", str(bad)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "('LM (batch size 20)', 1)" in refused.stderr
