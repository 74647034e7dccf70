"""Gangs over nodes in the simulator (issue 11): racks in cluster specs, the scaling rule beyond
the measured GPU counts, the crossing cost per extra node and rack, and the spread metric."""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

import pytest

from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.policies import make_policy
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster, summarize
from horus_core.sim.scaling import crossing, extrapolate, fit_power

MODEL = default_model()
TABLE: dict[str, Any] = json.loads(
    resources.files("horus_core").joinpath("data/simulation_throughputs.json").read_text()
)
R50 = "ResNet-50 (batch size 64)"
STEPS = 100_000


def solo(job_type: str, gpus: int) -> float:
    return float(TABLE["v100"][str((job_type, gpus))]["null"])


def test_cluster_spec_with_nodes_and_racks() -> None:
    nodes = build_cluster("v100:64/8/32")
    assert len(nodes) == 8 and all(len(n.gpus) == 8 for n in nodes)
    assert [n.rack for n in nodes] == ["v100-r0"] * 4 + ["v100-r1"] * 4
    assert all(n.rack == "" for n in build_cluster("v100:64"))  # today's meaning kept
    mixed = build_cluster("k80:8/4,v100:8")
    assert [len(n.gpus) for n in mixed] == [4, 4, 8]
    for bad in ("v100:64/0", "v100:64/8/12", "v100:64/8/", "v100:64//8"):
        with pytest.raises(InvalidArgument):
            build_cluster(bad)


def test_power_law_fit_recovers_the_exponent_and_is_clamped() -> None:
    counts = [1, 2, 4, 8]
    assert fit_power(counts, [3.0 * w**0.7 for w in counts]) == pytest.approx(0.7)
    assert fit_power(counts, [3.0 * w**1.4 for w in counts]) == 1.0  # never superlinear
    assert fit_power(counts, [3.0 / w for w in counts]) == 0.0  # never slower with more GPUs
    assert fit_power([1], [2.0]) is None
    rates = [1.0, 1.9, 3.5, 6.0]
    assert extrapolate(counts, rates, 8) == pytest.approx(6.0)  # starts where the data ends
    b = fit_power(counts, rates)
    assert b is not None and extrapolate(counts, rates, 32) == pytest.approx(6.0 * 4**b)


def test_crossing_cost() -> None:
    assert crossing(1, 1) == 1.0
    assert crossing(3, 2, 0.9, 0.8) == pytest.approx(0.9**2 * 0.8)
    with pytest.raises(ValueError):
        crossing(0, 1)
    with pytest.raises(ValueError):
        SimConfig(cross_node_factor=0.0)


def _run(cluster: str, gpus: int, **config: Any) -> Any:
    job = TraceJob(R50, gpus, STEPS, 0.0)
    return Simulator([job], build_cluster(cluster), make_policy("fifo"), MODEL, SimConfig(**config)).run()


def test_a_gang_over_nodes_runs_at_the_extrapolated_rate_times_the_crossing_cost() -> None:
    counts = [1, 2, 4, 8]
    rate16 = extrapolate(counts, [solo(R50, w) for w in counts], 16)
    assert rate16 is not None and rate16 > solo(R50, 8)
    one_rack = _run("v100:16/8/16", 16)
    (rec,) = one_rack.records
    assert rec.gpus == 16 and rec.nodes == 2  # not capped to the node any more
    assert rec.finish == pytest.approx(STEPS / (rate16 * 0.9))
    two_racks = _run("v100:16/8/8", 16)
    assert two_racks.records[0].finish == pytest.approx(STEPS / (rate16 * 0.9 * 0.9))
    free = _run("v100:16/8/8", 16, cross_node_factor=1.0, cross_rack_factor=1.0)
    assert free.records[0].finish == pytest.approx(STEPS / rate16)
    metrics = summarize(one_rack)
    assert metrics["spread_share"] == 1.0 and one_rack.counters["extrapolated"] == 1


def test_a_job_on_one_node_pays_no_crossing_cost() -> None:
    result = _run("v100:16/8/8", 8, cross_node_factor=0.5, cross_rack_factor=0.5)
    (rec,) = result.records
    assert rec.nodes == 1 and rec.finish == pytest.approx(STEPS / solo(R50, 8))
    assert summarize(result)["spread_share"] == 0.0


def test_types_measured_at_one_count_are_still_lowered() -> None:
    job = TraceJob("A3C", 16, 1000, 0.0)
    result = Simulator([job], build_cluster("v100:16"), make_policy("fifo"), MODEL, SimConfig()).run()
    assert result.records[0].gpus == 1 and result.counters["capped_measured"] == 1
    assert math.isfinite(result.records[0].finish or math.inf)
