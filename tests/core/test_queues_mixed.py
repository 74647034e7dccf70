"""Quota reclaim and priority preemption on a cluster of mixed GPU types (issue 29, item 1), in
the simulator with the queues file of docs/queues.md: idle GPUs of a type the waiting job cannot
use (or that its queue may not hold) must not stand in for the GPUs a preemption would free."""

from __future__ import annotations

import pathlib
import re
import tomllib

import pytest
from queue_harness import Cluster

from horus_core.model import ClusterSnapshot, Job, JobSpec, JobState, Node, Preempt
from horus_core.policies import make_policy
from horus_core.queues import QueueConfig, QueuedPolicy, parse_config
from horus_core.queues.idle import IdleGpus
from horus_core.sim import simulate
from horus_core.sim.cluster import build_cluster
from horus_core.sim.config import SimConfig
from horus_core.sim.traces import TraceJob
from horus_core.testing import queue_config, queue_table, queues_toml

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "queues.md"
RESNET = "ResNet-18 (batch size 32)"
LONG = 10**6  # steps: runs past the end of the simulated hour


def doc_config() -> QueueConfig:
    """The queues file shown in docs/queues.md, as the master reads it."""
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    return parse_config(tomllib.loads(block.group(1)))


def team_a_fills_the_v100s() -> list[TraceJob]:
    return [
        TraceJob(RESNET, 1, LONG, 0.0, owner="alice", queue="team-a", gpu_types=("v100",), exclusive=True)
        for _ in range(8)
    ]


def run(trace: list[TraceJob], policy: str) -> dict[str, tuple[float, float | None, int]]:
    """Per owner-tagged job: (arrival, first start, preemptions), on 8 V100 + 4 idle K80."""
    queued = QueuedPolicy(make_policy(policy), doc_config())
    result = simulate(trace, "v100:8/4,k80:4/4", queued, config=SimConfig(max_time_s=3600.0))
    return {r.id: (r.arrival, r.first_start, r.preemptions) for r in result.records}


@pytest.mark.parametrize("policy", ["fifo", "horus"])
def test_team_b_reclaims_its_v100_quota_while_k80s_idle(policy: str) -> None:
    b = [
        TraceJob(RESNET, 1, 20000, 600.0, owner="carol", queue="team-b", gpu_types=("v100",), exclusive=True)
        for _ in range(2)
    ]
    out = run(team_a_fills_the_v100s() + b, policy)
    team_b = [v for v in out.values() if v[0] == 600.0]
    assert all(start is not None and start - 600.0 <= 2.0 for _, start, _ in team_b), team_b
    # team-a borrows 2 V100s (8 held: 4 v100 + 2 of any type nominal): exactly those go back.
    assert sum(p for a, _, p in out.values() if a == 0.0) >= 2


@pytest.mark.parametrize("policy", ["fifo", "horus"])
def test_team_b_without_a_type_list_reclaims_too(policy: str) -> None:
    # team-b's quota is V100 only (no borrowing): a K80 would take it past its limit.
    b = [TraceJob(RESNET, 1, 20000, 600.0, owner="carol", queue="team-b", exclusive=True)]
    out = run(team_a_fills_the_v100s() + b, policy)
    (start,) = [s for a, s, _ in out.values() if a == 600.0]
    assert start is not None and start - 600.0 <= 2.0


@pytest.mark.parametrize("policy", ["fifo", "horus"])
def test_a_high_class_v100_job_preempts_at_once_while_k80s_idle(policy: str) -> None:
    high = TraceJob(
        RESNET, 1, 20000, 900.0, owner="bob", queue="team-a", gpu_types=("v100",),
        priority_class="high", exclusive=True,
    )  # fmt: skip
    out = run([*team_a_fills_the_v100s(), high], policy)
    (start,) = [s for a, s, _ in out.values() if a == 900.0]
    assert start is not None and start - 900.0 <= 2.0


def gpu_job(jid: str, owner: str, gpus: int, per_node: int = 0, *, types: tuple[str, ...] = ()) -> Job:
    spec = JobSpec(
        ("train",), gpus=gpus, owner=owner, exclusive=True, gpu_types=types, gpus_per_node=per_node,
        nodes=gpus // per_node if per_node else 0,
    )  # fmt: skip
    return Job(jid, spec, JobState.PENDING)


def test_idle_gpus_count_only_whole_parts_of_a_gang() -> None:
    nodes: tuple[Node, ...] = build_cluster("v100:8/4,k80:4/4")
    busy = [
        Job(f"r{i}", JobSpec(("x",)), JobState.RUNNING, node=n.name, gpus=(n.gpus[i].uuid,))
        for n in nodes[:2]
        for i in range(3)
    ]  # one idle V100 on each V100 node, 4 idle K80s
    idle = IdleGpus.of(ClusterSnapshot(nodes, tuple(busy)), busy)
    v100 = frozenset({"v100"})
    assert idle.usable(gpu_job("g", "x", 2), v100) == 2  # any shape: both idle V100s
    assert idle.usable(gpu_job("g", "x", 2, per_node=2), v100) == 0  # 1 + 1: no part fits
    assert idle.usable(gpu_job("g", "x", 4, per_node=4), None) == 4  # the K80 node
    assert idle.usable(gpu_job("g", "x", 2, per_node=2), frozenset()) == 0


def test_a_gang_reclaims_when_idle_gpus_are_scattered() -> None:
    cfg = queue_config(
        queues_toml(
            queue_table("team-a", {"v100": 4}, borrowing_limit=4, users=("alice",)),
            queue_table("team-b", {"v100": 4}, users=("carol",)),
        )
    )
    c = Cluster(build_cluster("v100:8/4"), QueuedPolicy(make_policy("fifo"), cfg))
    c.submit(*(gpu_job(f"a{i}", "alice", 1) for i in range(8)))
    c.step()
    c.finish("a0")
    c.finish("a4")  # one idle V100 on each node; team-a holds 6 (2 borrowed)
    c.submit(gpu_job("g", "carol", 2, per_node=2))
    actions = c.step()
    assert len([a for a in actions if isinstance(a, Preempt)]) == 2
    assert c.waits["g"].code == "WaitingForReclaim"
    c.step()
    assert c.jobs["g"].state.active


def test_idle_gpus_taken_and_freed_keep_per_type_and_per_node_counts() -> None:
    nodes: tuple[Node, ...] = build_cluster("v100:8/4,k80:4/4")
    idle = IdleGpus.of(ClusterSnapshot(nodes, ()), [])
    v100 = frozenset({"v100"})
    idle.take(gpu_job("a", "x", 3), v100, 3)  # three V100s of the first node
    assert idle.usable(gpu_job("b", "x", 1), v100) == 5
    assert idle.usable(gpu_job("g", "x", 4, per_node=4), v100) == 4  # only the second node is whole
    idle.take(gpu_job("g", "x", 4, per_node=4), v100, 4)
    assert idle.usable(gpu_job("b", "x", 1), v100) == 1 and idle.usable(gpu_job("b", "x", 1), None) == 5
    idle.add(g.uuid for g in nodes[1].gpus[:2])  # a preemption frees two on the second node
    assert idle.usable(gpu_job("g", "x", 2, per_node=2), v100) == 2
    idle.take(gpu_job("b", "x", 3), v100, 3)
    assert idle.usable(gpu_job("b", "x", 1), v100) == 0 and idle.total == {"v100": 0, "k80": 4}
