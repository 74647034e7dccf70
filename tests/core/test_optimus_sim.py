"""Elastic jobs in the simulator: speed by GPU count, resizes charged the restart cost, options."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pytest

from horus_core.interference import default_model
from horus_core.model import Action, Assign, ClusterSnapshot
from horus_core.policies.optimus import OptimusPolicy
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster, summarize
from horus_core.sim.elastic import speed_table
from horus_core.sim.rates import RateCache
from tests.benchrun import bench

MODEL = default_model()
TABLE: dict[str, Any] = json.loads(
    resources.files("horus_core").joinpath("data/simulation_throughputs.json").read_text()
)
R50 = "ResNet-50 (batch size 64)"


def solo(job_type: str, gpus: int) -> float:
    return float(TABLE["v100"][str((job_type, gpus))]["null"])


def run(jobs: list[TraceJob], policy: Any, cluster: str = "v100:8", **config: Any) -> Simulator:
    sim = Simulator(jobs, build_cluster(cluster), policy, MODEL, SimConfig(**config))
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


@dataclass
class FourGpus:
    """Starts every pending job on the first four GPUs, whatever it asked for."""

    name: str = "four"
    seen: list[ClusterSnapshot] = field(default_factory=list)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        self.seen.append(snapshot)
        gpus = snapshot.nodes[0].gpus[:4]
        return [Assign(j.id, gpus[0].node, tuple(g.uuid for g in gpus)) for j in snapshot.pending()]


def test_an_elastic_job_runs_at_the_speed_of_the_count_it_was_given() -> None:
    steps = 500_000
    sim = run([TraceJob(R50, 1, steps, 0.0)], FourGpus(), elastic=1.0)
    (rec,) = sim.result.records  # type: ignore[attr-defined]
    assert rec.jct == pytest.approx(steps / solo(R50, 4), rel=1e-9)
    assert rec.gpus == 1 and sim.counters["elastic"] == 1
    fixed = run([TraceJob(R50, 1, steps, 0.0)], FourGpus(), strict=False)  # not elastic: dropped
    assert fixed.result.counters["dropped"] > 0  # type: ignore[attr-defined]


def test_unmeasured_counts_follow_the_fitted_speed_model() -> None:
    table = speed_table(RateCache(MODEL), R50, ["v100"], 8)
    assert sorted(table) == list(range(1, 9))
    for w in (1, 2, 4, 8):
        assert table[w]["v100"] == solo(R50, w)
    rates = [table[w]["v100"] for w in range(1, 9)]
    assert rates == sorted(rates)  # between the measured neighbours
    assert solo(R50, 4) < table[5]["v100"] < table[6]["v100"] < table[7]["v100"] < solo(R50, 8)


def _two_jobs(restart: float) -> Simulator:
    # a runs alone on the whole node; b arrives after the first re-plan and takes half of it.
    jobs = [TraceJob(R50, 1, 3_000_000, 0.0), TraceJob(R50, 1, 300_000, 700.0)]
    return run(jobs, OptimusPolicy(MODEL, restart_s=restart), elastic=1.0, restart_cost_s=restart)


@pytest.mark.parametrize("restart", [0.0, 30.0])
def test_optimus_resizes_an_elastic_job_and_the_resize_costs_the_restart(restart: float) -> None:
    sim = _two_jobs(restart)
    a, b = sim.result.records  # type: ignore[attr-defined]
    assert sim.counters["resizes"] >= 2  # a shrinks for b, grows back when b is done
    assert summarize(sim.result)["resizes"] == sim.counters["resizes"]  # type: ignore[attr-defined]
    assert a.preemptions == sim.counters["resizes"] and b.preemptions == 0
    assert a.finish is not None and b.finish is not None and b.finish < a.finish
    # Alone on 8 GPUs all the way it would finish sooner than it did.
    assert a.finish > 3_000_000 / solo(R50, 8)


def test_the_restart_cost_is_charged_per_resize() -> None:
    free, charged = _two_jobs(0.0), _two_jobs(30.0)
    a0, a30 = free.result.records[0], charged.result.records[0]  # type: ignore[attr-defined]
    assert free.counters["resizes"] == charged.counters["resizes"]
    assert a30.finish > a0.finish  # each resize lost 30 s of work


def test_hidden_lengths_reach_the_policy_as_zero_and_losses_as_reports() -> None:
    policy = OptimusPolicy(MODEL)
    jobs = [TraceJob(R50, 1, 400_000, 0.0), TraceJob(R50, 2, 400_000, 5_000.0)]
    sim = run(jobs, policy, elastic=1.0, elastic_known_steps=False)
    assert all(j.spec.total_steps == 0 and j.spec.gpus_max == 8 for j in sim.jobs)
    assert sim.result.unfinished == 0  # type: ignore[attr-defined]
    assert sum(j.steps for j in sim.jobs) == 800_000


def test_elastic_fraction_is_seeded_and_bounded() -> None:
    jobs = [TraceJob(R50, 1, 1000, float(i)) for i in range(40)]
    count = [run(jobs, FourGpus(), elastic=0.5, elastic_seed=s).counters["elastic"] for s in (1, 1, 2)]
    assert count[0] == count[1] and 5 < count[0] < 35
    with pytest.raises(ValueError, match="elastic"):
        SimConfig(elastic=1.5)


def test_the_bench_prints_one_line_per_measurement_and_a_ratio() -> None:
    lines = bench("optimus_time.py", "--sizes", "32", "--repeat", "1")
    calls = {(x["policy"], x["call"]) for x in lines if "policy" in x}
    assert calls == {("optimus", "first"), ("optimus", "replan"), ("optimus", "between"), ("horus", "first")}
    assert all(
        x["bench"] == "policy_time" and x["jobs"] == 32 and x["gpus"] == 16 for x in lines if "policy" in x
    )
    assert all(x["ms"] > 0 for x in lines if "ms" in x) and lines[-1]["ratio"] == "optimus_replan/horus"


def test_the_batch_bench_runs_every_policy_to_the_end() -> None:
    lines = bench("optimus_batch.py", "--jobs", "6", "--cluster", "v100:8", "--policies", "optimus", "fifo")
    runs = {x["policy"]: x for x in lines if "policy" in x}
    assert set(runs) == {"optimus", "fifo"} and all(r["unfinished"] == 0 for r in runs.values())
    assert runs["fifo"]["resizes"] == 0 and lines[-1]["ratio"] == "fifo/optimus"
    ratio = runs["fifo"]["makespan_h"] / runs["optimus"]["makespan_h"]
    assert lines[-1]["makespan_h"] == pytest.approx(ratio, abs=0.002)
