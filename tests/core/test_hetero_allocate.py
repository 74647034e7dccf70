"""Heterogeneity-aware ``horus``: a type per job by the allocation over effective throughput
(:mod:`horus_core.policies.allocate`) and moves of running jobs to the GPUs they should have
(:mod:`horus_core.policies.upgrade`), against ``horus-tiers`` (the tiers alone)."""

from __future__ import annotations

from horus_core.interference import default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, Preempt
from horus_core.policies import make_policy
from horus_core.policies.allocate import allocate

A3C = "A3C"  # about 2x faster on V100 than on K80 in the table
R18 = "ResNet-18 (batch size 256)"  # about 12x faster on V100 than on K80
MEM = {"k80": 11441, "v100": 16160}


def node(name: str, gtype: str, n: int = 1) -> Node:
    return Node(name, tuple(Gpu(f"{name}g{i}", name, i, gtype.upper(), MEM[gtype], gtype) for i in range(n)))


CLUSTER = (node("k", "k80"), node("v", "v100"))


def pending(jid: str, job_type: str, at: float = 0.0, exclusive: bool = False) -> Job:
    spec = JobSpec(("train",), job_type=job_type, exclusive=exclusive)
    return Job(jid, spec, JobState.PENDING, submitted_at=at)


def running(jid: str, job_type: str, gpu: str) -> Job:
    spec = JobSpec(("train",), job_type=job_type)
    return Job(jid, spec, JobState.RUNNING, attempt=1, node=gpu[0], gpus=(gpu,), version=1)


def by_id(actions: list[Action]) -> dict[str, Action]:
    return {a.job_id: a for a in actions}


def test_the_premise_of_these_tests_holds_in_the_table() -> None:
    model = default_model()
    ratio = {
        t: (model.solo_throughput(t, 1, "v100") or 0.0) / (model.solo_throughput(t, 1, "k80") or 1.0)
        for t in (A3C, R18)
    }
    assert ratio[R18] > 8.0 and 1.5 < ratio[A3C] < 3.0


def test_the_job_that_loses_most_on_the_slow_type_gets_the_fast_one_whatever_the_order() -> None:
    model = default_model()
    for jobs in ([pending("a", A3C), pending("r", R18)], [pending("r", R18), pending("a", A3C)]):
        assert allocate(jobs, {"k80": 1, "v100": 1}, model, slots=1.0) == {"a": "k80", "r": "v100"}
    alone = [pending("a", A3C, exclusive=True), pending("r", R18, exclusive=True)]
    assert allocate(alone, {"k80": 1, "v100": 1}, model, slots=2.0) == {"a": "k80", "r": "v100"}


def test_one_type_or_no_room_gives_no_allocation() -> None:
    model = default_model()
    assert allocate([pending("a", A3C)], {"v100": 4}, model) == {}
    assert allocate([], {"k80": 1, "v100": 1}, model) == {}


def test_horus_places_by_comparative_advantage_where_the_tiers_serve_the_queue_in_order() -> None:
    jobs = (pending("a", A3C, 0.0, exclusive=True), pending("r", R18, 1.0, exclusive=True))
    snapshot = ClusterSnapshot(CLUSTER, jobs)
    new = by_id(make_policy("horus").decide(snapshot, 10.0))
    old = by_id(make_policy("horus-tiers").decide(snapshot, 10.0))
    assert isinstance(new["a"], Assign) and new["a"].gpus == ("kg0",)
    assert isinstance(new["r"], Assign) and new["r"].gpus == ("vg0",)
    assert isinstance(old["a"], Assign) and old["a"].gpus == ("vg0",)  # first come, fast type
    assert not isinstance(old["r"], Assign)  # and the job that needed the V100 waits


def test_a_job_on_a_slow_type_moves_up_when_its_type_frees_after_its_minimum_run() -> None:
    policy = make_policy("horus")
    on_k80 = running("r", R18, "kg0")
    assert "r" not in by_id(policy.decide(ClusterSnapshot(CLUSTER, (on_k80,)), 0.0))
    assert "r" not in by_id(policy.decide(ClusterSnapshot(CLUSTER, (on_k80,)), 100.0))  # too soon
    move = by_id(policy.decide(ClusterSnapshot(CLUSTER, (on_k80,)), 1000.0))["r"]
    assert isinstance(move, Preempt) and "v100" in move.reason
    back = Job("r", on_k80.spec, JobState.PENDING, attempt=1, version=2)
    again = by_id(policy.decide(ClusterSnapshot(CLUSTER, (back,)), 1001.0))["r"]
    assert isinstance(again, Assign) and again.gpus == ("vg0",)


def test_no_move_without_a_faster_free_gpu_or_under_the_tiers_alone() -> None:
    busy = running("b", A3C, "vg0")
    policy = make_policy("horus")
    for t in (0.0, 1000.0):
        assert "r" not in by_id(policy.decide(ClusterSnapshot(CLUSTER, (running("r", R18, "kg0"), busy)), t))
    tiers = make_policy("horus-tiers")
    for t in (0.0, 1000.0):
        assert not by_id(tiers.decide(ClusterSnapshot(CLUSTER, (running("r", R18, "kg0"),)), t))
    single = (node("v", "v100", 2),)
    policy = make_policy("horus")
    for t in (0.0, 1000.0):  # one type: nothing to move up to
        assert not by_id(policy.decide(ClusterSnapshot(single, (running("r", R18, "vg0"),)), t))
