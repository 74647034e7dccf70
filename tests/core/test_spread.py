"""Gang placement across nodes and racks (horus_core.policies.spread) and fifo using it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.model import Assign, ClusterSnapshot, JobSpec, Wait
from horus_core.policies import make_policy, policy_names
from horus_core.policies.checks import check_actions
from horus_core.policies.spread import FreeNode, Pool, Shape
from horus_core.testing import nodes, pending, running


def free(name: str, n: int, rack: str = "", kind: str = "v100") -> FreeNode:
    return FreeNode(name, tuple(f"{name}g{i}" for i in range(n)), rack, kind)


def test_one_node_best_fit_wins_over_spreading() -> None:
    plan = Pool([free("a", 8), free("b", 4), free("c", 6)]).choose(Shape(4))
    assert plan is not None and plan.parts == (("b", ("bg0", "bg1", "bg2", "bg3")),)


def test_fewest_nodes_in_one_rack_before_fewer_nodes_over_racks() -> None:
    # r1 can hold 12 on 3 nodes; r2 only with r3's help (2 nodes but 2 racks).
    cluster = [free("a", 4, "r1"), free("b", 4, "r1"), free("c", 4, "r1")]
    cluster += [free("d", 6, "r2"), free("e", 6, "r3")]
    plan = Pool(cluster).choose(Shape(12))
    assert plan is not None
    assert {n for n, _ in plan.parts} == {"a", "b", "c"} and plan.racks == 1


def test_fewest_racks_when_no_rack_holds_it() -> None:
    cluster = [free("a", 4, "r1"), free("b", 8, "r2"), free("c", 8, "r2")]
    cluster += [free("d", 2, "r3"), free("e", 2, "r3")]
    plan = Pool(cluster).choose(Shape(20))
    assert plan is not None and plan.racks == 2
    assert [n for n, _ in plan.parts] == ["b", "c", "a"]  # rank order: most GPUs first
    assert len(plan.gpus) == 20 and plan.node == "b"


def test_rank_order_lists_the_rank0_node_first_and_its_gpus_together() -> None:
    plan = Pool([free("a", 8), free("b", 3), free("c", 8)]).choose(Shape(11))
    assert plan is not None
    assert plan.gpus == (*(f"ag{i}" for i in range(8)), "bg0", "bg1", "bg2")


def test_fixed_shape_is_honoured() -> None:
    plan = Pool([free("a", 8), free("b", 2), free("c", 3), free("d", 2)]).choose(Shape(8, gpus_per_node=2))
    assert plan is not None and sorted(len(u) for _, u in plan.parts) == [2, 2, 2, 2]
    plan = Pool([free("a", 8), free("b", 4), free("c", 5)]).choose(Shape(8, nodes=2))
    assert plan is not None and [(n, len(u)) for n, u in plan.parts] == [("b", 4), ("c", 4)]
    assert Pool([free("a", 8), free("b", 4)]).choose(Shape(8, nodes=4)) is None


def test_bad_shape_is_a_reason_not_a_crash() -> None:
    why = Pool([free("a", 8)]).place(Shape(8, gpus_per_node=3))
    assert why == "gang shape: 8 GPU(s) do not split into nodes of 3"
    with pytest.raises(ValueError, match="at least 1"):
        Pool([free("a", 8)]).choose(Shape(0))


def test_kinds_never_mix() -> None:
    cluster = [free("a", 4, kind="k80"), free("b", 4, kind="v100")]
    assert Pool(cluster).choose(Shape(8)) is None
    assert Pool(cluster).choose(Shape(4)) is not None


Racks = st.sampled_from(["r0", "r1", "r2", ""])
FreeSets = st.lists(st.tuples(st.integers(0, 8), Racks), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(FreeSets, st.integers(1, 40))
def test_all_or_none_and_never_more_nodes_than_needed(sets: list[tuple[int, str]], need: int) -> None:
    cluster = [free(f"n{i:02d}", n, rack) for i, (n, rack) in enumerate(sets)]
    plan = Pool(cluster).choose(Shape(need))
    total = sum(len(n.free) for n in cluster)
    if plan is None:
        assert total < need
        return
    assert len(plan.gpus) == need and len(set(plan.gpus)) == need
    offered = {n.name: set(n.free) for n in cluster}
    assert all(set(uuids) <= offered[name] and uuids for name, uuids in plan.parts)
    sizes = sorted((len(n.free) for n in cluster), reverse=True)
    fewest = next(k for k in range(1, len(sizes) + 1) if sum(sizes[:k]) >= need)
    by_rack: dict[str, list[int]] = {}
    for n in cluster:
        by_rack.setdefault(n.rack, []).append(len(n.free))
    in_one = [_fewest(v, need) for v in by_rack.values() if sum(v) >= need]
    if in_one:  # one rack can hold it: one rack, and the fewest nodes any rack needs
        assert plan.racks == 1 and plan.nodes == min(in_one)
    else:
        racks = sorted((sum(v) for v in by_rack.values()), reverse=True)
        assert plan.racks == next(k for k in range(1, len(racks) + 1) if sum(racks[:k]) >= need)
    assert plan.nodes >= fewest


def _fewest(sizes: list[int], need: int) -> int:
    s = sorted(sizes, reverse=True)
    return next(k for k in range(1, len(s) + 1) if sum(s[:k]) >= need)


def test_fifo_starts_a_job_larger_than_any_node_across_nodes() -> None:
    cluster = nodes(3, 8)
    snap = ClusterSnapshot(cluster, (running("r", "", ("n0g0",), "n0"), pending("big", gpus=16, at=1)))
    actions = make_policy("fifo").decide(snap, 10.0)
    assert len(actions) == 1 and isinstance(actions[0], Assign)
    big = actions[0]
    assert big.node == "n1" and len(big.gpus) == 16 and "n0g0" not in big.gpus
    assert check_actions(snap, list(actions)).assigns == [big]  # the checks accept a spread gang


def test_fifo_gang_waits_all_or_none_with_a_reason() -> None:
    cluster = nodes(2, 8)
    snap = ClusterSnapshot(cluster, (running("r", "", ("n0g0",), "n0"), pending("big", gpus=16, at=1)))
    (action,) = make_policy("fifo").decide(snap, 10.0)
    assert isinstance(action, Wait) and "needs 16 free GPU(s), 15 free" in action.reason


def test_fifo_prefers_one_rack() -> None:
    cluster = tuple(replace(n, rack=r) for n, r in zip(nodes(4, 8), ["x", "y", "y", "x"], strict=True))
    snap = ClusterSnapshot(cluster, (pending("a", gpus=4), pending("big", gpus=16, at=1)))
    a, big = make_policy("fifo").decide(snap, 10.0)
    assert isinstance(a, Assign) and isinstance(big, Assign)
    racks = {n.name: n.rack for n in cluster}
    assert len({racks[g.split("g")[0]] for g in big.gpus}) == 1
    assert a.node not in {g.split("g")[0] for g in big.gpus}


def test_fifo_honours_gpus_per_node() -> None:
    spec = JobSpec(("train",), gpus=4, gpus_per_node=2)
    job = replace(pending("g", gpus=4), spec=spec)
    (action,) = make_policy("fifo").decide(ClusterSnapshot(nodes(3, 8), (job,)), 0.0)
    assert isinstance(action, Assign)
    assert sorted({g.split("g")[0] for g in action.gpus}) == ["n0", "n1"]


def test_checks_refuse_a_gang_out_of_rank_order() -> None:
    snap = ClusterSnapshot(nodes(2, 2), (pending("g", gpus=4),))
    bad = Assign("g", "n0", ("n0g0", "n1g0", "n0g1", "n1g1"))
    plan = check_actions(snap, [bad])
    assert not plan.assigns and "rank order" in plan.dropped[0][1]
    wrong_head = Assign("g", "n0", ("n1g0", "n1g1", "n0g0", "n0g1"))
    assert not check_actions(snap, [wrong_head]).assigns


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_starts_a_gang_larger_than_a_node(name: str) -> None:
    r50 = "ResNet-50 (batch size 64)"
    big = replace(
        pending("big", r50, gpus=16, at=1.0), spec=JobSpec(("t",), gpus=16, job_type=r50, total_steps=1000)
    )
    snap = ClusterSnapshot(nodes(3, 8), (running("r", r50, ("n0g0",), "n0"), big, pending("s", r50, at=2.0)))
    policy = make_policy(name)
    actions = [a for t in (0.0, 400.0, 800.0) for a in policy.decide(snap, t) if a.job_id == "big"]
    started = [a for a in actions if isinstance(a, Assign)]
    assert started, f"{name} never started the 16-GPU gang: {actions}"
    gang = started[0]
    assert len(gang.gpus) == 16 and "n0g0" not in gang.gpus
    assert check_actions(snap, [gang]).assigns == [gang]


@pytest.mark.parametrize("name", ["binpack", "horus", "lucid", "gandiva", "horus+"])
def test_packing_policies_never_share_a_gpu_with_a_gang_over_nodes(name: str) -> None:
    r18 = "ResNet-18 (batch size 16)"
    gang = running("g", r18, tuple(f"n{k}g{i}" for k in (0, 1) for i in range(4)), "n0")
    gang = replace(gang, spec=replace(gang.spec, gpus=8))  # 2 nodes of 4: a gang over nodes
    small = [pending(f"s{i}", r18, at=float(i)) for i in range(6)]
    snap = ClusterSnapshot(nodes(3, 4), (gang, *small))
    actions = make_policy(name).decide(snap, 10.0)
    used = [u for a in actions if isinstance(a, Assign) for u in a.gpus]
    assert used and all(u.startswith("n2") for u in used), actions


@pytest.mark.parametrize("name", ["binpack", "horus", "lucid", "gandiva", "horus+"])
def test_packing_policies_spread_a_gang_shaped_over_nodes_that_one_node_could_hold(name: str) -> None:
    """A 4-GPU gang asking for 2 per node is wide though every node has 4 GPUs: it is placed
    apart (2 + 2, over two nodes), and a running one shares its GPUs with nobody."""
    r18 = "ResNet-18 (batch size 16)"
    shaped = JobSpec(("t",), gpus=4, gpus_per_node=2, job_type=r18)
    new = replace(pending("new", r18, gpus=4, at=0.0), spec=shaped)
    (start,) = make_policy(name).decide(ClusterSnapshot(nodes(3, 4), (new,)), 10.0)
    assert isinstance(start, Assign) and len({g.split("g")[0] for g in start.gpus}) == 2
    gang = replace(running("g", r18, ("n0g0", "n0g1", "n1g0", "n1g1"), "n0"), spec=shaped)
    small = [pending(f"s{i}", r18, at=float(i)) for i in range(6)]
    actions = make_policy(name).decide(ClusterSnapshot(nodes(3, 4), (gang, *small)), 10.0)
    used = [u for a in actions if isinstance(a, Assign) for u in a.gpus]
    assert used and not set(used) & set(gang.gpus), actions


@settings(max_examples=150, deadline=None)
@given(FreeSets, st.lists(st.integers(1, 20), min_size=1, max_size=8))
def test_a_pool_taken_from_answers_as_a_fresh_one(sets: list[tuple[int, str]], needs: list[int]) -> None:
    """The incremental bookkeeping of Pool.take: after each placement, choices equal those of a
    pool built afresh from the GPUs left, and no GPU is handed out twice."""
    pool = Pool([free(f"n{i:02d}", n, rack) for i, (n, rack) in enumerate(sets)])
    given_out: set[str] = set()
    for need in needs:
        left = list(pool.nodes.values())
        plan = pool.choose(Shape(need))
        assert plan == Pool(left).choose(Shape(need))
        if plan is not None:
            assert not given_out & set(plan.gpus)
            given_out |= set(plan.gpus)
            pool.take(plan)
    assert sum(len(n.free) for n in pool.nodes.values()) == sum(n for n, _ in sets) - len(given_out)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 8), st.sampled_from("ab")), min_size=1, max_size=10),
    st.lists(st.tuples(st.integers(1, 24), st.sampled_from([0, 2, 4])), min_size=1, max_size=12),
)
def test_a_pool_that_remembers_full_shapes_answers_as_a_fresh_one(
    sizes: list[tuple[int, str]], asks: list[tuple[int, int]]
) -> None:
    """A pool skips the search for a shape that found no room earlier (its GPUs only shrink):
    every answer over a sequence of places and takes is a fresh pool's on the same free GPUs."""
    pool = Pool([free(f"n{i}", n, rack) for i, (n, rack) in enumerate(sizes)])
    for gpus, per in asks * 2:  # (each shape asked again after the pool shrank)
        shape = Shape(gpus, per)
        fresh = Pool(list(pool.nodes.values())).place(shape)
        got = pool.place(shape)
        assert got == fresh
        if not isinstance(got, str):
            pool.take(got)
