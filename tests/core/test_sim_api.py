"""The simulator's public surface, and that it stays pure (no grpc, no matplotlib on import)."""

from __future__ import annotations

import subprocess
import sys

import horus_core.sim as sim
from horus_core.sim import SimConfig, TraceJob, compare, simulate, summarize

R18 = "ResNet-18 (batch size 32)"


def test_public_surface_is_pinned() -> None:
    assert sorted(sim.__all__) == sorted(
        [
            "METRIC_KEYS",
            "JobRecord",
            "RateModel",
            "SimConfig",
            "SimResult",
            "SimulationError",
            "Simulator",
            "SyntheticSpec",
            "TraceJob",
            "build_cluster",
            "compare",
            "generate_synthetic",
            "load_trace",
            "load_workload",
            "parse_cluster_spec",
            "parse_synthetic",
            "parse_trace",
            "simulate",
            "summarize",
        ]
    )


def test_simulate_and_compare_from_names() -> None:
    jobs = [TraceJob(R18, 1, 10_000, float(i * 60)) for i in range(6)]
    result = simulate(jobs, "v100:2", "fifo", config=SimConfig(restart_cost_s=0))
    metrics = summarize(result)
    assert set(metrics) == set(sim.METRIC_KEYS)
    assert metrics["jobs"] == 6 and metrics["unfinished"] == 0
    both = compare("synthetic:jobs=30,rate=3,seed=2", "v100:8", ["fifo", "horus"])
    assert list(both) == ["fifo", "horus"]
    assert all(r.unfinished == 0 for r in both.values())


def test_importing_the_simulator_loads_no_io_or_plotting_library() -> None:
    code = (
        "import sys, horus_core.sim, horus_core.sim.cli\n"
        "bad = [m for m in ('grpc', 'google.protobuf', 'sqlite3', 'matplotlib') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
