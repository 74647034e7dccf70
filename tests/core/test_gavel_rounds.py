"""Gavel's round mechanism through ``decide()``, with a fake clock (``now`` is an argument)."""

from __future__ import annotations

import dataclasses

import pytest

from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.model import Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, Preempt, Wait
from horus_core.policies import make_policy, policy_names
from horus_core.policies.checks import check_actions
from horus_core.policies.gavel import VARIANTS, GavelPolicy, make, round_s_from_env
from horus_core.testing import placed, requeued

RESNET = "ResNet-50 (batch size 64)"  # about 3x faster on a V100 than on a K80


def node(name: str, gpu_type: str, count: int = 1) -> Node:
    gpus = tuple(Gpu(f"{name}-g{i}", name, i, gpu_type.upper(), 16000, gpu_type) for i in range(count))
    return Node(name, gpus)


def pending(job_id: str, job_type: str = RESNET, gpus: int = 1, steps: int = 1000) -> Job:
    spec = JobSpec(("x",), gpus=gpus, job_type=job_type, total_steps=steps)
    return Job(job_id, spec, JobState.PENDING)


class Cluster:
    """Applies a policy's checked actions the way the simulator does (stop first, then start)."""

    def __init__(self, nodes: tuple[Node, ...], jobs: list[Job]) -> None:
        self.nodes = nodes
        self.jobs = {j.id: j for j in jobs}

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(self.nodes, tuple(self.jobs.values()))

    def step(self, policy: GavelPolicy, now: float) -> list[object]:
        snap = self.snapshot()
        plan = check_actions(snap, policy.decide(snap, now))
        assert not plan.dropped, plan.dropped
        for p in plan.preempts:
            self.jobs[p.job_id] = requeued(self.jobs[p.job_id])
        for a in plan.assigns:
            self.jobs[a.job_id] = placed(self.jobs[a.job_id], a, now)
        return [*plan.preempts, *plan.assigns]

    def where(self) -> dict[str, str]:
        return {j.id: j.node for j in self.jobs.values() if j.state is JobState.RUNNING}


def two_types() -> tuple[Node, ...]:
    return (node("k80-0", "k80"), node("v100-0", "v100"))


def test_every_gavel_policy_is_registered() -> None:
    names = policy_names()
    for name in ("gavel-las", "gavel-las-perf", "gavel-las-packed", "gavel-ftf-perf", "gavel-makespan-perf"):
        assert name in names
        assert make_policy(name).name == name


def test_jobs_trade_types_across_rounds_with_a_preemption_between() -> None:
    policy = make("gavel-las-perf", default_model(), round_s=100.0)
    c = Cluster(two_types(), [pending("a"), pending("b")])
    c.step(policy, 0.0)
    first = c.where()
    assert sorted(first.values()) == ["k80-0", "v100-0"]
    assert c.step(policy, 50.0) == []  # mid-round: nothing changes
    moved = c.step(policy, 100.0)  # round 1: both have had their share of one type
    assert sorted(type(a).__name__ for a in moved) == ["Preempt", "Preempt"]
    assert all("moves to" in a.reason for a in moved if isinstance(a, Preempt))
    c.step(policy, 101.0)  # GPUs are free now: each job starts on the other type
    assert c.where() == {"a": first["b"], "b": first["a"]}
    assert policy.ledger.run_s("a", "k80") + policy.ledger.run_s("a", "v100") == pytest.approx(100.0)


def test_the_same_snapshot_twice_counts_time_once_and_gives_the_same_actions() -> None:
    policy = make("gavel-las-perf", default_model(), round_s=100.0)
    c = Cluster(two_types(), [pending("a"), pending("b"), pending("c")])
    c.step(policy, 0.0)
    snap = c.snapshot()
    once = policy.decide(snap, 40.0)
    received = {j: dict(v) for j, v in policy.ledger.received.items()}
    twice = policy.decide(snap, 40.0)
    assert once == twice
    assert policy.ledger.received == received
    assert sum(sum(v.values()) for v in received.values()) == pytest.approx(80.0)  # 2 jobs x 40 s


def test_a_waiting_job_is_served_next_round_and_gone_jobs_are_forgotten() -> None:
    policy = make("gavel-las-perf", default_model(), round_s=100.0)
    c = Cluster(two_types(), [pending("a"), pending("b"), pending("c")])
    c.step(policy, 0.0)
    waiting = next(j for j in c.jobs if j not in c.where())
    reasons = [a for a in policy.decide(c.snapshot(), 10.0) if isinstance(a, Wait)]
    assert [w.job_id for w in reasons] == [waiting] and "share of GPU time" in reasons[0].reason
    c.step(policy, 100.0)
    c.step(policy, 101.0)
    assert waiting in c.where()
    del c.jobs[waiting]
    c.step(policy, 102.0)
    assert waiting not in policy.ledger.first_seen and waiting not in policy.ledger.received


def test_idle_gpus_mid_round_go_to_new_arrivals_on_their_fastest_type() -> None:
    policy = make("gavel-las-perf", default_model(), round_s=100.0)
    c = Cluster(two_types(), [])
    c.step(policy, 0.0)
    c.jobs["a"] = pending("a")
    started = c.step(policy, 30.0)
    assert started == [Assign("a", "v100-0", ("v100-0-g0",))]


def test_a_job_is_never_placed_where_it_cannot_run() -> None:
    # ResNet-50 at batch size 128 on 2 GPUs does not fit a K80 (the table's throughput is 0).
    policy = make("gavel-las", default_model(), round_s=100.0)
    c = Cluster((node("k80-0", "k80", 2), node("v100-0", "v100", 2)), [])
    c.jobs = {"big": pending("big", "ResNet-50 (batch size 128)", gpus=2), "other": pending("other", gpus=2)}
    for t in (0.0, 100.0, 101.0, 200.0, 201.0):
        c.step(policy, t)
        assert c.where().get("big", "v100-0") == "v100-0"


def test_gavel_las_packed_shares_a_gpu_when_jobs_outnumber_gpus() -> None:
    policy = make("gavel-las-packed", default_model(), round_s=100.0)
    light = "ResNet-18 (batch size 16)"
    c = Cluster((node("v100-0", "v100", 1),), [pending("a", light), pending("b", light)])
    c.step(policy, 0.0)
    assert len(c.where()) == 2 and len({j.gpus for j in c.jobs.values()}) == 1


@pytest.mark.parametrize(("floor", "shared"), [(0.85, True), (0.9, False)])
def test_gavel_las_packed_never_pairs_a_job_below_its_floor(floor: float, shared: bool) -> None:
    kind = "Transformer (batch size 16)"  # two of them on one V100: 0.88x each (the packaged table)
    spec = dataclasses.replace(pending("a", kind).spec, min_speed=floor)
    c = Cluster(
        (node("v100-0", "v100", 1),), [dataclasses.replace(pending("a", kind), spec=spec), pending("b", kind)]
    )
    policy = make("gavel-las-packed", default_model(), round_s=100.0)
    together = set()
    for t in (0.0, 100.0, 200.0, 300.0):
        c.step(policy, t)
        together.add(len(c.where()))
    assert max(together) == (2 if shared else 1)  # below the floor the two take turns


def test_round_length_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidArgument):
        make("gavel-las", default_model(), round_s=0.0)
    monkeypatch.setenv("HORUS_GAVEL_ROUND_S", "2.5")
    assert round_s_from_env() == 2.5
    assert make_policy("gavel-las-perf").round_s == 2.5  # type: ignore[attr-defined]
    monkeypatch.setenv("HORUS_GAVEL_ROUND_S", "soon")
    with pytest.raises(InvalidArgument, match="HORUS_GAVEL_ROUND_S"):
        round_s_from_env()


def test_rounds_only_mechanism_starts_an_arrival_at_the_next_boundary() -> None:
    policy = GavelPolicy(VARIANTS["gavel-las-perf"], default_model(), round_s=100.0, work_conserving=False)
    c = Cluster(two_types(), [])
    c.step(policy, 0.0)
    c.jobs["a"] = pending("a")
    assert c.step(policy, 30.0) == []
    assert c.step(policy, 100.0) == [Assign("a", "v100-0", ("v100-0-g0",))]
