"""Policy behaviour on real Gavel job types: who shares a GPU with whom, and why jobs wait."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import credit, plus_queues

from horus_core import reasoncodes as rc
from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.interference.table import packaged_table
from horus_core.model import (
    Action,
    Assign,
    ClusterSnapshot,
    Job,
    JobChanges,
    JobState,
    NodeState,
    Preempt,
    Wait,
)
from horus_core.policies import Policy, make_policy, policy_names
from horus_core.policies.attained import MIN_SLICE_S, Attained
from horus_core.policies.gandiva import GandivaPolicy
from horus_core.policies.kmeans import choose_k, kmeans
from horus_core.policies.pack import PackingPolicy
from horus_core.testing import nodes, pending, running
from horus_core.testing.ledgers import LasLedger

PACKING = ["binpack", "gandiva", "horus", "horus-paper", "horus+", "lucid"]
R18_16, R18_32 = "ResNet-18 (batch size 16)", "ResNet-18 (batch size 32)"
R50_16, REC_512 = "ResNet-50 (batch size 16)", "Recommendation (batch size 512)"
R50_128, T_256 = "ResNet-50 (batch size 128)", "Transformer (batch size 256)"


def by_id(actions: list[Action]) -> dict[str, Action]:
    ids = [a.job_id for a in actions]
    assert len(ids) == len(set(ids)), "one action per job"
    return {a.job_id: a for a in actions}


def test_registry_offers_every_policy() -> None:
    assert set(PACKING) | {"fifo"} <= set(policy_names())
    for name in policy_names():
        assert make_policy(name).name == name


@pytest.mark.parametrize("name", ["horus", "lucid"])
def test_interference_aware_policies_pair_compatible_jobs(name: str) -> None:
    snap = ClusterSnapshot(nodes(), (running("a", R18_16, ("n0g0",)), pending("b", R18_32)))
    act = by_id(make_policy(name).decide(snap, 10.0))["b"]
    assert isinstance(act, Assign) and act.gpus == ("n0g0",)
    assert act.predicted_slowdown == pytest.approx(default_model().co_speeds([R18_32, R18_16], "v100")[0])


@pytest.mark.parametrize("name", ["horus", "horus+", "lucid"])
def test_interference_aware_policies_keep_a_bad_pair_apart(name: str) -> None:
    """ResNet-50 and Recommendation fit in memory together but crawl (0.29x and 0.09x)."""
    snap = ClusterSnapshot(nodes(), (running("a", R50_16, ("n0g0",)), pending("b", REC_512)))
    act = by_id(make_policy(name).decide(snap, 10.0))["b"]
    assert isinstance(act, Wait)
    assert "every GPU with enough memory" in act.reason


@pytest.mark.parametrize("name", ["binpack", "horus-paper", "gandiva"])
def test_blind_policies_pack_the_bad_pair(name: str) -> None:
    snap = ClusterSnapshot(nodes(), (running("a", R50_16, ("n0g0",)), pending("b", REC_512)))
    act = by_id(make_policy(name).decide(snap, 10.0))["b"]
    assert isinstance(act, Assign) and act.predicted_slowdown < 0.15


@pytest.mark.parametrize("name", PACKING)
def test_nobody_packs_a_pair_that_runs_out_of_memory(name: str) -> None:
    snap = ClusterSnapshot(nodes(), (running("a", R50_128, ("n0g0",)), pending("b", T_256)))
    act = by_id(make_policy(name).decide(snap, 10.0))["b"]
    assert isinstance(act, Wait)
    assert "memory" in act.reason or "fit" in act.reason


def test_binpack_fills_a_gpu_before_opening_the_next() -> None:
    snap = ClusterSnapshot(nodes(1, 2), tuple(pending(f"j{i}", R18_16, at=i) for i in range(3)))
    gpus = [a.gpus for a in make_policy("binpack").decide(snap, 0.0) if isinstance(a, Assign)]
    assert gpus == [("n0g0",)] * 3
    horus = [a.gpus for a in make_policy("horus").decide(snap, 0.0) if isinstance(a, Assign)]
    assert sorted(set(horus)) == [("n0g0",), ("n0g1",)]  # spread first


@pytest.mark.parametrize("name", [*PACKING, "fifo"])
def test_gangs_go_to_one_node_or_wait_with_the_largest_set(name: str) -> None:
    snap = ClusterSnapshot(
        nodes(2, 4),
        (
            running("x", R50_128, ("n0g0", "n0g1")),
            running("y", R50_128, ("n1g0", "n1g1")),
            pending("big", R50_128, gpus=4, at=1.0),
            pending("huge", R18_16, gpus=16, at=2.0),
            pending("pair", R50_128, gpus=2, at=3.0),
        ),
    )
    acts = by_id(make_policy(name).decide(snap, 10.0))
    assert isinstance(acts["big"], Wait) and "largest" in acts["big"].reason and "2" in acts["big"].reason
    assert isinstance(acts["huge"], Wait)
    # Larger than every node: spread over nodes (issue 11), all or none, on free GPUs only.
    assert acts["huge"].reason == "needs 16 free GPU(s), 4 free on 2 node(s) (largest set 2)"
    pair = acts["pair"]
    assert isinstance(pair, Assign) and len(pair.gpus) == 2
    assert all(g.startswith(pair.node) for g in pair.gpus)


@pytest.mark.parametrize("name", PACKING)
def test_exclusive_jobs_are_alone(name: str) -> None:
    snap = ClusterSnapshot(
        nodes(1, 2),
        (
            running("solo", R18_16, ("n0g0",), exclusive=True),
            pending("e", R18_16, at=1.0, exclusive=True),
            pending("x", R18_16, at=2.0),
            pending("y", R18_16, at=3.0),
        ),
    )
    acts = by_id(make_policy(name).decide(snap, 10.0))
    used = Counter(g for a in acts.values() if isinstance(a, Assign) for g in a.gpus)
    assert used["n0g0"] == 0  # nobody joins the running exclusive job
    e = acts["e"]
    if isinstance(e, Assign):
        assert used[e.gpus[0]] == 1  # and the new one is alone
    else:
        assert "exclusive" in e.reason


@pytest.mark.parametrize("name", PACKING)
def test_no_ready_gpu(name: str) -> None:
    lost = tuple(replace(n, state=NodeState.LOST) for n in nodes())
    acts = make_policy(name).decide(ClusterSnapshot(lost, (pending("a", R18_16),)), 0.0)
    assert acts == [Wait("a", "no ready GPU in the cluster", rc.NO_READY_NODES)]


def test_horus_util_serves_low_utilisation_first_and_looks_ahead_five() -> None:
    # Gangs of the node's size that cannot start: one GPU is held by an exclusive job.
    jobs = [running("x", R18_16, ("n0g0",), exclusive=True)]
    jobs += [pending(f"big{i}", R50_16, gpus=4, at=float(i)) for i in range(8)]
    jobs += [pending("heavy", R50_16, at=98.0), pending("light", R18_16, at=99.0)]
    acts = by_id(make_policy("horus-util").decide(ClusterSnapshot(nodes(1, 4), tuple(jobs)), 100.0))
    assert isinstance(acts["light"], Assign)  # lowest predicted utilisation: served first
    heavy = acts["heavy"]
    assert isinstance(heavy, Wait) and "look-ahead 5" in heavy.reason  # behind 6 misses
    assert isinstance(acts["big0"], Wait) and "largest" in acts["big0"].reason


def test_every_pending_job_gets_exactly_one_action_with_a_reason() -> None:
    types = packaged_table().job_types
    sizes = [1, 1, 2, 4, 8]
    jobs = tuple(pending(f"j{i}", types[i % len(types)], gpus=sizes[i % 5], at=i) for i in range(60))
    snap = ClusterSnapshot(nodes(2, 8), jobs)
    for name in policy_names():
        acts = by_id(make_policy(name).decide(snap, 1000.0))
        assert set(acts) == {j.id for j in jobs}, name
        for a in acts.values():
            assert isinstance(a, (Assign, Wait))
            if isinstance(a, Wait):
                assert len(a.reason) > 10
            else:
                assert 0.0 < a.predicted_slowdown <= 1.0


def test_gandiva_splits_a_pair_worse_than_taking_turns_and_remembers_it() -> None:
    policy = make_policy("gandiva")
    assert isinstance(policy, GandivaPolicy)
    a = running("a", R50_16, ("n0g0",))
    b = replace(running("b", REC_512, ("n0g0",)), started_at=5.0)
    acts = policy.decide(ClusterSnapshot(nodes(1, 2), (a, b)), 10.0)
    assert len(acts) == 1 and isinstance(acts[0], Preempt) and acts[0].job_id == "b"
    assert "< 1.0" in acts[0].reason
    # b is back in the queue: the idle GPU is fine, but never again next to a
    again = policy.decide(ClusterSnapshot(nodes(1, 1), (a, pending("b", REC_512))), 20.0)
    assert isinstance(again[0], Wait) and "split from" in again[0].reason


def test_gandiva_keeps_a_good_pair() -> None:
    snap = ClusterSnapshot(nodes(), (running("a", R18_16, ("n0g0",)), running("b", R18_32, ("n0g0",))))
    assert make_policy("gandiva").decide(snap, 0.0) == []


def test_lucid_shares_only_between_equal_gpu_counts_and_two_per_gpu() -> None:
    snap = ClusterSnapshot(
        nodes(1, 2),
        (
            running("g2", R18_16, ("n0g0", "n0g1")),
            pending("one", R18_16, at=1.0),
            pending("two", R18_32, gpus=2, at=2.0),
            pending("three", R18_32, gpus=2, at=3.0),
        ),
    )
    acts = by_id(make_policy("lucid").decide(snap, 10.0))
    assert isinstance(acts["one"], Wait)
    placed = [a for a in acts.values() if isinstance(a, Assign)]
    assert len(placed) == 1 and placed[0].gpus == ("n0g0", "n0g1")


def test_lucid_serves_shortest_work_first() -> None:
    long = pending("long", R18_16, at=0.0, total_steps=10**7)
    short = pending("short", R18_16, at=1.0, total_steps=10)
    unknown = pending("unknown", "my-model", at=-1.0)
    acts = make_policy("lucid").decide(ClusterSnapshot(nodes(1, 1), (long, short, unknown)), 5.0)
    assert acts[0] == Assign("short", "n0", ("n0g0",), 1.0)
    assert [a.job_id for a in acts] == ["short", "long", "unknown"]


def test_horus_plus_serves_the_queue_with_most_credit_first() -> None:
    old = [pending(f"gang{i}", R50_128, gpus=4, at=0.0) for i in range(3)]
    new = [pending(f"small{i}", R18_16, at=900.0 + i) for i in range(12)]
    mid = [pending(f"mid{i}", "LM (batch size 80)", gpus=2, at=500.0) for i in range(2)]
    policy = make_policy("horus+")
    assert isinstance(policy, PackingPolicy) and policy.las is not None
    queues = plus_queues(policy, new + mid + old, 1000.0)
    assert 3 <= len(queues) <= 5
    assert {j.id for j in queues[0]} == {j.id for j in old}  # 1000 s x 3 beats 95 s x 12
    assert credit(queues[0], 1000.0) >= credit(queues[-1], 1000.0)
    acts = policy.decide(ClusterSnapshot(nodes(1, 4), tuple(new + mid + old)), 1000.0)
    assert isinstance(acts[0], Assign) and acts[0].job_id.startswith("gang")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(1, 20)), min_size=1, max_size=40))
def test_kmeans_is_deterministic_and_groups_3_to_5(points: list[tuple[int, int, int]]) -> None:
    import numpy as np

    xy = np.array([(x, y) for x, y, _ in points], np.float64)
    w = np.array([c for _, _, c in points], np.float64)
    labels = choose_k(xy, w)
    assert np.array_equal(labels, choose_k(xy, w))
    distinct = len(np.unique(xy, axis=0))
    groups = len(set(labels.tolist()))
    assert groups <= min(5, distinct)
    assert groups >= min(3, distinct) or groups == len(set(map(tuple, xy.tolist())))
    _, inertia = kmeans(xy, w, 1)
    assert inertia >= kmeans(xy, w, min(3, distinct))[1] - 1e-9


def _ran(policy: Policy, job: Job, seconds: float) -> None:
    """Let ``job`` run ``seconds`` under ``policy`` (two passes), then hand it back pending."""
    gpus = tuple(f"n0g{k}" for k in range(job.spec.gpus))
    busy = replace(job, state=JobState.RUNNING, node="n0", gpus=gpus, attempt=1)
    policy.decide(ClusterSnapshot(nodes(1, 8), (busy,)), 0.0)
    policy.decide(ClusterSnapshot(nodes(1, 8), (busy,)), seconds)


@pytest.mark.parametrize("name", ["horus", "horus+"])
def test_horus_serves_least_attained_service_first_fifo_within_a_level(name: str) -> None:
    policy = make_policy(name)
    old = pending("old", R18_16, gpus=2, at=0.0, exclusive=True)
    _ran(policy, old, 3600.0)  # 2 GPU-hours attained: level 2 (1 and 2 GPU-hours passed)
    late = pending("late", R50_16, gpus=2, at=50.0, exclusive=True)
    early = pending("early", R50_16, gpus=2, at=40.0, exclusive=True)
    snap = ClusterSnapshot(nodes(1, 2), (old, late, early))
    acts = by_id(policy.decide(snap, 4000.0))
    assert isinstance(acts["early"], Assign)  # level 0, first come
    assert isinstance(acts["late"], Wait) and isinstance(acts["old"], Wait)
    # The util order (horus-util) would serve ResNet-18 (lower utilisation) first.
    util = by_id(make_policy("horus-util").decide(snap, 4000.0))
    assert isinstance(util["old"], Assign)


def test_horus_preempts_a_job_past_its_level_for_a_waiting_new_one_after_the_min_slice() -> None:
    policy = make_policy("horus")
    long = running("long", R50_16, ("n0g0",), exclusive=True)
    new = pending("new", R18_16, at=10.0, exclusive=True)
    one = nodes(1, 1)
    assert not [a for a in policy.decide(ClusterSnapshot(one, (long,)), 0.0) if isinstance(a, Preempt)]
    acts = policy.decide(ClusterSnapshot(one, (long, new)), 3000.0)  # 0.83 GPU-h: still level 0
    assert not [a for a in acts if isinstance(a, Preempt)]
    acts = policy.decide(ClusterSnapshot(one, (long, new)), 3700.0)  # past 1 GPU-hour: level 1
    assert [a.job_id for a in acts if isinstance(a, Preempt)] == ["long"]
    assert isinstance(by_id(acts)["new"], Wait)  # served on the next pass, once the GPU is free
    util = make_policy("horus-util")
    assert not [a for a in util.decide(ClusterSnapshot(one, (long, new)), 3700.0) if isinstance(a, Preempt)]


def test_horus_keeps_a_fresh_attempt_for_the_min_slice() -> None:
    policy = make_policy("horus")
    big = pending("big", R50_16, exclusive=True)
    _ran(policy, big, 5 * 3600.0)  # 5 GPU-hours: level 3
    again = replace(big, state=JobState.RUNNING, node="n0", gpus=("n0g0",), attempt=2)
    new = pending("new", R18_16, at=10.0, exclusive=True)
    one = nodes(1, 1)
    t = 5 * 3600.0 + 100.0
    acts = policy.decide(ClusterSnapshot(one, (again, new)), t)  # attempt 2 just seen
    assert not [a for a in acts if isinstance(a, Preempt)]
    acts = policy.decide(ClusterSnapshot(one, (again, new)), t + MIN_SLICE_S)
    assert [a.job_id for a in acts if isinstance(a, Preempt)] == ["big"]


def test_attained_service_counts_gpu_seconds_and_forgets_finished_jobs() -> None:
    ledger = LasLedger()
    las = ledger.las
    two = running("two", R50_16, ("n0g0", "n0g1"))
    ledger.observe(ClusterSnapshot(nodes(1, 2), (two,)), 100.0)
    ledger.observe(ClusterSnapshot(nodes(1, 2), (two,)), 400.0)
    assert las.service == {"two": 600.0}
    assert las.level("two") == 0 and las.bounds == [3600.0, 7200.0, 14400.0, 28800.0]
    ledger.observe(ClusterSnapshot(nodes(1, 2), ()), 500.0)
    assert las.service == {}


@pytest.mark.parametrize("with_changes", [True, False])
def test_the_ledger_columns_credit_like_a_per_job_sum_past_their_first_slots(with_changes: bool) -> None:
    """400 jobs (past the columns' first 64 slots) come, run on 1 to 3 GPUs, stop, finish and
    leave over 60 passes, seen through the changes (the master, the simulator) or whole: the
    ledger's service is the per-job sum of GPUs x span, a job that stops keeps what it
    attained, and the slots of jobs that left are given again (the columns stay small)."""
    ledger, rng = LasLedger(), random.Random(7)
    las = ledger.las
    expect: dict[str, float] = {}
    live: dict[str, Job] = {}
    now, serial, epoch, most = 0.0, 0, 0, 0
    changed: dict[str, Job | None] = {}

    def observe() -> None:
        nonlocal epoch, changed
        delta = JobChanges("test", epoch, epoch + 1, changed) if with_changes else None
        epoch, changed = epoch + 1, {}
        ledger.observe(ClusterSnapshot(nodes(1, 1), tuple(live.values()), changes=delta), now)

    seen: dict[str, int] = {}  # running id -> its attempt at the last pass
    for _ in range(60):
        for _ in range(rng.randint(0, 12)):
            serial += 1
            live[f"j{serial}"] = changed[f"j{serial}"] = pending(f"j{serial}", R50_16)
        for job_id, job in list(live.items()):
            roll = rng.random()
            if roll < 0.1:
                del live[job_id]  # finished: forgotten
                changed[job_id] = None
                expect.pop(job_id, None)
            elif roll < 0.5 and job.state is JobState.PENDING:
                gpus = tuple(f"{job_id}g{k}" for k in range(rng.randint(1, 3)))
                run = replace(job, state=JobState.RUNNING, gpus=gpus, attempt=job.attempt + 1)
                live[job_id] = changed[job_id] = run
            elif roll < 0.6 and job.state is JobState.RUNNING:
                live[job_id] = changed[job_id] = replace(job, state=JobState.PENDING, gpus=())
        span = rng.choice([0.5, 60.0, 3600.0])
        now += span
        most = max(most, len(live) + sum(j is None for j in changed.values()))  # (before the leavers go)
        observe()  # (a job running since the last pass in the same attempt gains GPUs x span)
        running = {i: j for i, j in live.items() if j.state is JobState.RUNNING}
        for job_id, job in running.items():
            if seen.get(job_id) == job.attempt:
                expect[job_id] = expect.get(job_id, 0.0) + len(job.gpus) * span
        seen = {i: j.attempt for i, j in running.items()}
    # (seen whole, the ledger forgets the jobs that left once it holds more than are live)
    kept = las.service if with_changes else {k: v for k, v in las.service.items() if k in live}
    assert serial > 256 and kept == expect
    assert len(las.columns.slots) <= len(live) and len(las.columns.views) <= max(64, 2 * most)


@pytest.mark.parametrize("base, factor, levels", [(0.0, 4.0, 5), (3600.0, 1.0, 5), (3600.0, 4.0, 0)])
def test_bad_las_thresholds_are_refused(base: float, factor: float, levels: int) -> None:
    with pytest.raises(InvalidArgument, match="las"):
        Attained(base_gpu_s=base, factor=factor, levels=levels)


def test_horus_frees_a_whole_node_for_a_waiting_gang_and_only_where_it_can() -> None:
    policy = make_policy("horus")
    a = running("a", R50_16, ("n0g0",), exclusive=True)
    b = running("b", R50_16, ("n0g1",), exclusive=True)
    c = running("c", R50_16, ("n1g0",), "n1", exclusive=True)
    two = nodes(2, 2)
    policy.decide(ClusterSnapshot(two, (a, b, c)), 0.0)
    c_new = replace(c, attempt=2)  # c restarted just now: inside its min slice
    gang = pending("gang", R18_16, gpus=2, at=10.0, exclusive=True)
    acts = policy.decide(ClusterSnapshot(two, (a, b, c_new, gang)), 4000.0)
    assert sorted(x.job_id for x in acts if isinstance(x, Preempt)) == ["a", "b"]
    huge = pending("huge", R18_16, gpus=4, at=10.0, exclusive=True)  # no node has 4 GPUs
    acts = policy.decide(ClusterSnapshot(two, (a, b, huge)), 4000.0)
    assert not [x for x in acts if isinstance(x, Preempt)]
