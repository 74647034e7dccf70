"""The simulator's public entry points, for the CLI, the master's demo and notebooks.

>>> from horus_core.sim import simulate, compare
>>> result = simulate("horus_core/data/traces/msr_seed0_2869ce_cap.trace", "v100:16", "fifo")
>>> results = compare("synthetic:jobs=500,rate=8,seed=0", "v100:64", ["fifo", "horus"])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Node
from horus_core.policies import Policy, make_policy, policy_names
from horus_core.sim.cluster import DEFAULT_GPUS_PER_NODE, build_cluster
from horus_core.sim.config import SimConfig, SimResult
from horus_core.sim.engine import Progress, Simulator
from horus_core.sim.rates import RateModel
from horus_core.sim.synthetic import generate, is_synthetic, parse_synthetic
from horus_core.sim.traces import TraceJob, load_trace

Workload = str | Sequence[TraceJob]
Cluster = str | Sequence[Node]


def load_workload(source: Workload, model: RateModel, seed: int | None = None) -> list[TraceJob]:
    """A trace file path, a ``synthetic:...`` spec (``seed`` applies when the spec names none),
    or trace jobs already in memory."""
    if not isinstance(source, str):
        return list(source)
    if is_synthetic(source):
        spec = parse_synthetic(source)
        if seed is not None and "seed=" not in source:
            spec = replace(spec, seed=seed)
        return generate(spec, model.solo_throughput)
    return load_trace(source)


def simulate(
    workload: Workload,
    cluster: Cluster,
    policy: str | Policy,
    *,
    model: InterferenceModel | None = None,
    config: SimConfig | None = None,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    seed: int | None = None,
    progress: Progress | None = None,
) -> SimResult:
    """Run one policy (a name, or a policy object) over a workload on a cluster (a spec like
    ``"v100:64"``, or nodes). Policies built by name share ``model`` with the simulator."""
    model = model or default_model()
    nodes = build_cluster(cluster, gpus_per_node) if isinstance(cluster, str) else tuple(cluster)
    chosen = make_policy(policy, model) if isinstance(policy, str) else policy
    jobs = load_workload(workload, model, seed)
    return Simulator(jobs, nodes, chosen, model, config, progress).run()


def compare(
    workload: Workload,
    cluster: Cluster,
    policies: Sequence[str],
    *,
    model: InterferenceModel | None = None,
    config: SimConfig | None = None,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    seed: int | None = None,
) -> Mapping[str, SimResult]:
    """The same workload under each named policy (each gets a fresh policy object)."""
    check_policies(policies)
    model = model or default_model()
    jobs = load_workload(workload, model, seed)
    nodes = build_cluster(cluster, gpus_per_node) if isinstance(cluster, str) else tuple(cluster)
    return {
        name: simulate(jobs, nodes, name, model=model, config=config, gpus_per_node=gpus_per_node)
        for name in policies
    }


def check_policies(names: Sequence[str]) -> None:
    """Raise InvalidArgument (listing the valid names) if any name is not a registered policy."""
    for name in names:
        if name not in policy_names():
            make_policy(name)  # raises InvalidArgument naming the valid policies
