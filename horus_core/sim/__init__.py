"""Trace-driven discrete-event simulator: the live policies, replayed on a simulated cluster.

Public surface (pinned by tests/core/test_sim_api.py):

- :func:`simulate` / :func:`compare`: run one or several policies over a workload;
- :func:`summarize`: the per-policy metrics of a :class:`SimResult`;
- :class:`SimConfig`: rounds, preemption cost, slow threshold;
- :func:`load_trace`, :func:`parse_synthetic`, :func:`generate_synthetic`, :class:`TraceJob`;
- :func:`build_cluster`: nodes from a spec like ``"k80:32,p100:32,v100:32"``;
- :class:`Simulator`: the engine, for callers that bring their own policy object or model.
"""

from __future__ import annotations

from horus_core.sim.api import compare, load_workload, simulate
from horus_core.sim.cluster import build_cluster, parse_cluster_spec
from horus_core.sim.config import SimConfig, SimResult
from horus_core.sim.engine import Simulator
from horus_core.sim.metrics import METRIC_KEYS, summarize
from horus_core.sim.rates import RateModel, SimulationError
from horus_core.sim.state import JobRecord
from horus_core.sim.synthetic import SyntheticSpec, parse_synthetic
from horus_core.sim.synthetic import generate as generate_synthetic
from horus_core.sim.traces import TraceJob, load_trace, parse_trace

__all__ = [
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
