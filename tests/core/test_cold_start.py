"""Cold starts in the simulator: the policies' model hides the trace's job types, knows their cards,
and learns what running jobs show; the ground truth stays the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from horus_core.caps import with_margin
from horus_core.interference import default_model
from horus_core.interference.table import packaged_table
from horus_core.modelcard import card_to_dict, packaged_cards
from horus_core.policies import make_policy
from horus_core.sim.api import load_workload
from horus_core.sim.cluster import build_cluster
from horus_core.sim.cold import ColdLearner, cold_model, hide_types
from horus_core.sim.engine import Simulator
from horus_core.sim.metrics import summarize

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "horus_core" / "data" / "traces" / "physical_small_test.trace"
EXE = Path(sys.executable).parent / "horus-sim"
R50 = "ResNet-50 (batch size 16)"


def test_the_cold_model_knows_only_the_cards() -> None:
    table = packaged_table()
    hidden = {R50, "LM (batch size 5)"}
    cold = cold_model(table, hidden, packaged_cards())
    assert cold.solo_throughput(R50, 1, "v100") != table.solo[("v100", R50, 1)]  # the card's guess
    assert all(R50 not in k for k in hide_types(table, hidden).pairs)
    assert cold.profile_of(R50).source == "card" and cold.profile_of("LM (batch size 5)").source == "card"
    assert cold.profile_of("ResNet-18 (batch size 16)").source == "table"  # not hidden
    blind = cold_model(table, hidden)
    assert blind.profile_of(R50).source == "default" and blind.solo_throughput(R50, 1, "v100") is None


def test_a_cold_run_learns_what_running_jobs_show(tmp_path: Path) -> None:
    """Long 1-GPU jobs on two GPUs: the first ones run alone, later ones share a GPU."""
    truth = default_model()
    kinds = [R50, "LM (batch size 5)", "ResNet-18 (batch size 32)", "Recommendation (batch size 512)"]
    rows = [f"{kinds[i % 4]},1,{40_000 + 5_000 * i},{600 * i}" for i in range(8)]
    trace = tmp_path / "long.csv"
    trace.write_text("job_type,gpus,total_steps,arrival_s\n" + "\n".join(rows) + "\n")
    jobs = load_workload(str(trace), truth)
    nodes = build_cluster("v100:2", 2)
    hidden = {j.job_type for j in jobs}
    cold = cold_model(packaged_table(), hidden, packaged_cards())
    learner = ColdLearner(truth, cold)
    result = Simulator(jobs, nodes, make_policy("horus", cold), truth, None, None, learner).run()
    assert summarize(result)["unfinished"] == 0
    assert learner.observations > 0
    measured = [t for t in hidden if cold.profile_of(t).source == "measured"]
    assert measured, "no job type ran alone long enough to be measured"
    for t in measured:  # what it learned is the truth's profile (a measured footprint: with the caps' margin)
        got, want = cold.profile_of(t), truth.profile_of(t)
        assert (got.util_avg, got.util_peak, got.mem_mib) == (
            want.util_avg,
            want.util_peak,
            with_margin(want.mem_mib),
        )
        gpus = next(j.gpus for j in jobs if j.job_type == t)
        assert cold.solo_throughput(t, gpus, "v100") in (None, truth.solo_throughput(t, gpus, "v100"))
    assert truth.profile_of(R50).source == "table"  # the truth is untouched


def test_horus_sim_cold_start_options(tmp_path: Path) -> None:
    base = [
        str(EXE),
        "--trace",
        str(TRACE),
        "--cluster",
        "v100:4/4",
        "--policies",
        "horus",
        "--json",
        "--no-plots",
    ]
    runs = {
        name: subprocess.run([*base, *extra], capture_output=True, text=True, timeout=300)
        for name, extra in (("warm", []), ("cards", ["--cold-start", "--cards"]), ("blind", ["--cold-start"]))
    }
    for name, proc in runs.items():
        assert proc.returncode == 0, (name, proc.stderr)
        assert json.loads(proc.stdout)["horus"]["unfinished"] == 0
    bad = subprocess.run([*base, "--cards"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "only with --cold-start" in bad.stderr
    cards = {R50: {**card_to_dict(packaged_cards()[R50]), "batch": 0}}
    (tmp_path / "cards.json").write_text(json.dumps(cards))
    named = subprocess.run(
        [*base, "--cold-start", "--cards", str(tmp_path / "cards.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert named.returncode == 2 and "model_card.batch" in named.stderr
