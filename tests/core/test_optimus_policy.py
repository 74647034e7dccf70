"""The optimus policy: marginal allocation, re-plan interval (fake clock), resizes, elastic specs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.model import Assign, ClusterSnapshot, Job, JobSpec, JobState, Node, Preempt, Wait
from horus_core.policies import make_policy
from horus_core.policies.base import Reports
from horus_core.policies.checks import check_actions
from horus_core.policies.optimus import OptimusPolicy
from horus_core.policies.optimus.allocate import Demand, allocate
from horus_core.policies.optimus.place import feasible_resizes
from horus_core.sim.elastic import synthetic_curve
from horus_core.testing import gpu
from horus_core.validation import validate_spec

INF = math.inf
R50 = "ResNet-50 (batch size 64)"
MODEL = default_model()


def test_marginal_allocation_by_hand() -> None:
    a = Demand("a", 1, 4, (INF, 100.0, 60.0, 50.0, 45.0))
    b = Demand("b", 1, 4, (INF, 100.0, 89.0, 85.0, 84.0))
    c = Demand("c", 1, 1, (INF, 10.0))
    # 4 GPUs: each gets its minimum, the last goes to a (gain 40 beats b's 11).
    assert allocate([a, b, c], 4) == {"a": 2, "b": 1, "c": 1}
    # 6 GPUs: then b (11 > a's 10), then a (10 > b's 4).
    assert allocate([a, b, c], 6) == {"a": 3, "b": 2, "c": 1}
    # Plenty: stops where nobody gains (a's last GPU gains 5, b's 1; no more exists).
    assert allocate([a, b, c], 100) == {"a": 4, "b": 4, "c": 1}


def test_admission_is_shortest_first_and_fixed_jobs_keep_their_count() -> None:
    long = Demand("long", 2, 2, (INF, INF, 500.0))
    short = Demand("short", 2, 2, (INF, INF, 50.0))
    kept = Demand("kept", 1, 8, (INF,) * 9, fixed=3)
    assert allocate([long, short, kept], 5) == {"kept": 3, "short": 2}
    running = Demand("running", 2, 2, (INF, INF, 500.0), keep=True)  # re-planned, never sent back to wait
    assert allocate([short, running], 2) == {"running": 2}


def test_no_gain_leaves_gpus_free() -> None:
    flat = Demand("flat", 1, 4, (INF, 10.0, 10.0, 11.0, 12.0))
    assert allocate([flat], 4) == {"flat": 1}


@st.composite
def demands(draw: st.DrawFn) -> tuple[list[Demand], int]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        lo = draw(st.integers(1, 4))
        hi = draw(st.integers(lo, 8))
        times = draw(st.lists(st.floats(0.0, 1e6) | st.just(INF), min_size=hi, max_size=hi))
        out.append(Demand(f"j{i}", lo, hi, (INF, *times)))
    return out, draw(st.integers(0, 40))


@settings(max_examples=200, deadline=None)
@given(demands())
def test_allocation_never_exceeds_capacity_and_respects_minimums(case: tuple[list[Demand], int]) -> None:
    ds, capacity = case
    alloc = allocate(ds, capacity)
    used = sum(alloc.values())
    assert used <= capacity
    for d in ds:
        if d.key in alloc:
            assert d.lo <= alloc[d.key] <= d.hi
        else:  # waits only because its minimum no longer fits
            assert capacity - used < d.lo


# ------------------------------------------------------------------------ the policy


def node(name: str = "n0", per: int = 8) -> Node:
    return Node(name, tuple(gpu(name, k) for k in range(per)))


def elastic(jid: str, gpus: int = 1, lo: int = 1, hi: int = 8, steps: int = 2_000_000) -> Job:
    spec = JobSpec(("train",), gpus=gpus, job_type=R50, total_steps=steps, gpus_min=lo, gpus_max=hi)
    return Job(jid, spec, JobState.PENDING)


def run_on(job: Job, uuids: tuple[str, ...]) -> Job:
    return replace(job, state=JobState.RUNNING, node="n0", gpus=uuids, attempt=1)


def test_registered_and_a_lone_elastic_job_gets_the_whole_node() -> None:
    policy = make_policy("optimus", MODEL)
    snap = ClusterSnapshot((node(),), (elastic("a"),))
    actions = policy.decide(snap, 0.0)
    (assign,) = actions
    assert isinstance(assign, Assign) and len(assign.gpus) == 8
    plan = check_actions(snap, actions)
    assert plan.assigns == [assign] and not plan.dropped


def test_two_equal_jobs_split_the_node() -> None:
    snap = ClusterSnapshot((node(),), (elastic("a"), elastic("b")))
    actions = OptimusPolicy(MODEL).decide(snap, 0.0)
    counts = {a.job_id: len(a.gpus) for a in actions if isinstance(a, Assign)}
    assert counts == {"a": 4, "b": 4}
    gpus = [g for a in actions if isinstance(a, Assign) for g in a.gpus]
    assert len(set(gpus)) == 8


def test_replans_at_most_every_interval_on_a_fake_clock() -> None:
    policy = OptimusPolicy(MODEL, replan_s=600.0)
    cluster = (node(),)
    first = policy.decide(ClusterSnapshot(cluster, (elastic("a"),)), 0.0)
    assert len(first) == 1 and isinstance(first[0], Assign)
    small = run_on(elastic("a"), ("n0g0", "n0g1"))  # say it runs on 2 of the 8 GPUs
    for now in (1.0, 300.0, 599.0):
        assert policy.decide(ClusterSnapshot(cluster, (small,)), now) == []  # keeps its allocation
    (stop,) = policy.decide(ClusterSnapshot(cluster, (small,)), 600.0)
    assert isinstance(stop, Preempt) and "2 -> 8" in stop.reason
    resumed = replace(small, state=JobState.PENDING)
    (grow,) = policy.decide(ClusterSnapshot(cluster, (resumed,)), 601.0)
    assert isinstance(grow, Assign) and len(grow.gpus) == 8


def test_between_replans_newcomers_only_get_free_gpus() -> None:
    policy = OptimusPolicy(MODEL, share=False)
    a = run_on(elastic("a"), tuple(f"n0g{k}" for k in range(6)))
    policy.decide(ClusterSnapshot((node(),), (a,)), 0.0)  # the plan at t=0 keeps a on 6
    actions = policy.decide(ClusterSnapshot((node(),), (a, elastic("b"))), 100.0)
    (assign,) = actions
    assert isinstance(assign, Assign) and assign.job_id == "b"
    assert set(assign.gpus) == {"n0g6", "n0g7"}


def test_restart_cost_keeps_a_nearly_done_job_as_it_is() -> None:
    policy = OptimusPolicy(MODEL, restart_s=30.0)
    a = run_on(elastic("a", steps=2_000), tuple(f"n0g{k}" for k in range(4)))  # seconds from the end
    assert policy.decide(ClusterSnapshot((node(),), (a,)), 0.0) == []


def test_fewest_nodes_best_fit() -> None:
    busy = run_on(elastic("x", hi=1), tuple(f"n0g{k}" for k in range(5)))
    busy = replace(busy, spec=replace(busy.spec, gpus=5, gpus_min=0, gpus_max=0))
    fixed = Job("f", JobSpec(("t",), gpus=3, job_type=R50, total_steps=10**6), JobState.PENDING)
    policy = OptimusPolicy(MODEL, replan_s=1e9)
    policy.last_plan = 0.0
    (assign,) = policy.decide(ClusterSnapshot((node("n0"), node("n1")), (busy, fixed)), 1.0)
    assert isinstance(assign, Assign) and assign.node == "n0" and len(assign.gpus) == 3


def test_resizes_only_where_one_node_will_hold_the_new_count() -> None:
    running = {"a": ("n0", 4), "b": ("n0", 4), "c": ("n1", 2), "d": ("n1", 2)}
    # a shrinks to 2 (n0 gets 2 back); c can grow to 4 on its own node (2 free there + its own 2);
    # b wants 8: n0 holds its 4 + the 2 a gives = 6 only, so it grows to 6.
    out = feasible_resizes(running, {"a": 2, "b": 8, "c": 4}, {"n1": 2})
    assert out == {"a": 2, "b": 6, "c": 4}
    # Nothing frees up: d cannot grow at all, so it is not stopped for nothing.
    assert feasible_resizes(running, {"d": 8}, {}) == {}


def test_unknown_length_comes_from_the_loss_fit() -> None:
    policy = OptimusPolicy(MODEL)
    job = elastic("a", steps=0)
    curve = synthetic_curve(400_000, l0=3.0, floor=0.5)
    rng = np.random.default_rng(0)
    for k in np.linspace(0, 150_000, 80):
        policy.hear(Reports.of([("a", float(k), curve.loss(k) * (1 + 0.02 * rng.standard_normal()), 0.0)]))
    assert policy.steps_left(job) == pytest.approx(400_000 - 150_000, rel=0.3)
    assert OptimusPolicy(MODEL).steps_left(job) == 1000.0  # nothing known yet
    policy.hear(Reports.of([("a", 600_000.0, None, 0.0)]))  # past the fitted end and still training
    assert policy.steps_left(job) == pytest.approx(60_000.0)  # a tenth of its steps done


def test_a_full_cluster_waits_with_a_reason() -> None:
    hog = run_on(elastic("hog", hi=1), tuple(f"n0g{k}" for k in range(8)))
    hog = replace(hog, spec=replace(hog.spec, gpus=8, gpus_min=0, gpus_max=0, exclusive=True))
    actions = OptimusPolicy(MODEL).decide(ClusterSnapshot((node(),), (hog, elastic("b"))), 0.0)
    assert [type(a) for a in actions] == [Wait] and actions[0].job_id == "b"
    assert "every GPU is allocated; re-planned every 10 min" in actions[0].reason
    huge = Job("h", JobSpec(("t",), gpus=8, job_type=R50), JobState.PENDING)
    (wait,) = OptimusPolicy(MODEL).decide(ClusterSnapshot((node(per=4),), (huge,)), 0.0)
    # Larger than every node: spread over nodes (issue 11), so it waits for 8 free GPUs anywhere.
    assert isinstance(wait, Wait) and "needs 8 free GPU(s), 4 free on 1 node(s)" in wait.reason


# ----------------------------------------------------------------- spec and checks


def test_checks_accept_counts_in_the_range_only() -> None:
    snap = ClusterSnapshot((node(),), (elastic("a", gpus=2, lo=2, hi=4),))
    for count, ok in ((1, False), (2, True), (4, True), (5, False)):
        plan = check_actions(snap, [Assign("a", "n0", tuple(f"n0g{k}" for k in range(count)))])
        assert bool(plan.assigns) is ok
    fixed = ClusterSnapshot((node(),), (Job("f", JobSpec(("t",), gpus=2), JobState.PENDING),))
    assert not check_actions(fixed, [Assign("f", "n0", ("n0g0",))]).assigns


@pytest.mark.parametrize(
    ("gpus", "lo", "hi"), [(1, 0, 4), (3, 4, 8), (5, 1, 4), (2, 2, 9999), (2, -1, 4), (1, 1, 0)]
)
def test_bad_elastic_ranges_are_rejected(gpus: int, lo: int, hi: int) -> None:
    with pytest.raises(InvalidArgument, match="gpus"):
        validate_spec(JobSpec(("t",), gpus=gpus, gpus_min=lo, gpus_max=hi))


def test_good_elastic_range_and_node_bound() -> None:
    spec = JobSpec(("t",), gpus=2, gpus_min=1, gpus_max=16)
    assert validate_spec(spec, max_gpus_per_node=8) is spec and spec.gpu_range() == (1, 16)
    with pytest.raises(InvalidArgument, match="largest node"):
        validate_spec(JobSpec(("t",), gpus=12, gpus_min=12, gpus_max=16), max_gpus_per_node=8)


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[ClusterSnapshot, float]:
    cluster = tuple(node(f"n{i}", draw(st.integers(1, 8))) for i in range(draw(st.integers(1, 3))))
    free = [g for n in cluster for g in n.gpus]
    jobs: list[Job] = []
    for i in range(draw(st.integers(0, 12))):
        lo = draw(st.integers(1, 4))
        gpus = draw(st.integers(lo, 8))
        hi = draw(st.sampled_from([0, gpus, 8]))
        spec = JobSpec(
            ("t",),
            gpus=gpus,
            job_type=draw(
                st.sampled_from([R50, "ResNet-18 (batch size 16)", "Transformer (batch size 128)"])
            ),
            total_steps=draw(st.integers(0, 10**6)),
            gpus_min=lo if hi else 0,
            gpus_max=hi,
            exclusive=draw(st.booleans()),
        )
        job = Job(f"j{i}", spec, JobState.PENDING, submitted_at=float(i))
        count = draw(st.integers(lo if hi else gpus, hi or gpus))
        same_node = free[:count] and all(g.node == free[0].node for g in free[:count])
        if draw(st.booleans()) and len(free) >= count and same_node:
            held, free = free[:count], free[count:]
            job = replace(job, state=JobState.RUNNING, node=held[0].node, gpus=tuple(g.uuid for g in held))
        jobs.append(job)
    return ClusterSnapshot(cluster, tuple(jobs)), draw(st.sampled_from([0.0, 1.0, 700.0]))


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_every_action_passes_the_masters_checks_and_respects_ranges(
    case: tuple[ClusterSnapshot, float],
) -> None:
    snap, now = case
    policy = OptimusPolicy(MODEL)
    policy.last_plan = 0.0 if now == 1.0 else -INF  # 1.0: a round between re-plans
    actions = policy.decide(snap, now)
    plan = check_actions(snap, actions)
    assert not plan.dropped
    by_id = {j.id: j for j in snap.jobs}
    for a in plan.assigns:
        lo, hi = by_id[a.job_id].spec.gpu_range()
        assert lo <= len(a.gpus) <= hi
    pending = {j.id for j in snap.pending()}
    acted = {a.job_id for a in actions if isinstance(a, Assign | Wait)}
    assert acted == pending  # every pending job is started or told why it waits
    if now == 1.0:
        assert not plan.preempts  # between re-plans running jobs keep their GPUs
