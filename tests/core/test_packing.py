"""The packing kernel: identical to its plain-Python twin, and never breaks a hard rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horus_core.packing import PackParams, Placement, Problem, codes, place
from horus_core.testing.kernel_twin import place_reference

SPEEDS = [0.0, 0.3, 0.45, 0.5, 0.8, 0.9, 1.0]  # few values: ties in cost and in speed are common


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    n_kinds = draw(st.integers(1, 2))
    n_types = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(0, 4), min_size=0, max_size=4))  # a node may have no healthy GPU
    n_gpus = sum(sizes)
    n_jobs = draw(st.integers(0, 12))

    def arr(elements: st.SearchStrategy[int] | st.SearchStrategy[float], n: int, dtype: type) -> np.ndarray:
        return np.array(draw(st.lists(elements, min_size=n, max_size=n)), dtype=dtype)

    nres = arr(st.integers(0, 3), n_gpus, np.int32) * arr(st.booleans(), n_gpus, np.int32)
    res = arr(st.integers(0, n_types - 1), 3 * n_gpus, np.int32).reshape(n_gpus, 3)
    util = arr(st.integers(0, 100).map(float), n_types, np.float64)
    return Problem(
        node_start=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int32),
        gpu_kind=arr(st.integers(0, n_kinds - 1), n_gpus, np.int32),
        gpu_nres=nres,
        gpu_res=res,
        gpu_excl=arr(st.booleans(), n_gpus, np.bool_) & (nres == 1),
        kind_cap=np.array([16160, 40960][:n_kinds], np.int64),
        cls_mem=arr(st.sampled_from([500, 2000, 2000, 4000, 7580, 12000]), n_types, np.int64),
        cls_util=util,
        cls_peak=np.minimum(100.0, util + arr(st.integers(0, 60).map(float), n_types, np.float64)),
        speed=arr(st.sampled_from(SPEEDS), n_kinds * n_types * n_types, np.float64).reshape(
            n_kinds, n_types, n_types
        ),
        job_cls=arr(st.integers(0, n_types - 1), n_jobs, np.int32),
        job_gpus=arr(st.sampled_from([1, 1, 1, 2, 3, 4, 5]), n_jobs, np.int32),
        job_excl=arr(st.booleans(), n_jobs, np.bool_) & arr(st.booleans(), n_jobs, np.bool_),
    )


params_st = st.builds(
    PackParams,
    mode=st.sampled_from([codes.MODE_HORUS, codes.MODE_BINPACK]),
    max_per_gpu=st.integers(1, 3),
    min_speed=st.sampled_from([0.0, 0.45, 0.8]),
    min_gain=st.sampled_from([-math.inf, 0.0, 0.15]),
    lookahead=st.sampled_from([-1, -1, 0, 2]),
)

FAST = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(problems(), params_st, st.sampled_from([1 << 22, 0]))
def test_kernel_places_exactly_like_the_reference(problem: Problem, params: PackParams, memo: int) -> None:
    kernel, reference = place(problem, params, memo_limit=memo), place_reference(problem, params)
    for field in ("node", "gpus", "speed", "reason", "detail"):
        np.testing.assert_array_equal(getattr(kernel, field), getattr(reference, field), err_msg=field)


@FAST
@given(problems(), params_st)
def test_no_placement_breaks_a_hard_rule(problem: Problem, params: PackParams) -> None:
    out = place(problem, params)
    residents = [list(problem.gpu_res[d, : problem.gpu_nres[d]]) for d in range(problem.n_gpus)]
    exclusive = list(problem.gpu_excl)
    node_of = np.repeat(np.arange(len(problem.node_start) - 1), np.diff(problem.node_start))
    new_on: dict[int, list[int]] = {}  # GPU -> classes of the jobs placed there in this pass
    for j in range(problem.n_jobs):
        gpus = out.gpus_of(j)
        if out.node[j] < 0:
            assert out.reason[j] != codes.R_PLACED and (gpus == -1).all()  # all or nothing
            continue
        assert out.reason[j] == codes.R_PLACED
        assert len(set(gpus.tolist())) == problem.job_gpus[j]  # the whole gang ...
        assert (node_of[gpus] == out.node[j]).all()  # ... on one node
        for d in gpus:
            assert not exclusive[d], "joined an exclusive job"
            assert len(residents[d]) < params.max_per_gpu, "too many jobs on a GPU"
            if problem.job_excl[j]:
                assert not residents[d], "exclusive job on a busy GPU"
            residents[d].append(problem.job_cls[j])
            exclusive[d] = bool(problem.job_excl[j])
            new_on.setdefault(int(d), []).append(int(problem.job_cls[j]))
    for d, new in new_on.items():
        k = problem.gpu_kind[d]
        used = sum(int(problem.cls_mem[r]) for r in residents[d])
        assert problem.kind_cap[k] - used > params.reserve_mib, "memory"
        others = list(residents[d])
        for t in new:
            others.remove(t)
            assert all(problem.speed[k, t, r] > 0 and problem.speed[k, r, t] > 0 for r in others), "pair"
            others.append(t)
    placed = out.node >= 0
    assert (out.speed[placed] >= params.min_speed).all()
    assert (out.speed[placed] <= 1.0).all() and (out.speed[~placed] == 0.0).all()


def _single_gpu(**kw: object) -> Problem:
    base: dict[str, object] = dict(
        node_start=np.array([0, 1], np.int32),
        gpu_kind=np.zeros(1, np.int32),
        gpu_nres=np.zeros(1, np.int32),
        gpu_res=np.full((1, 3), -1, np.int32),
        gpu_excl=np.zeros(1, np.bool_),
        kind_cap=np.array([16160], np.int64),
        cls_mem=np.array([2000, 2000], np.int64),
        cls_util=np.array([30.0, 30.0]),
        cls_peak=np.array([50.0, 50.0]),
        speed=np.array([[[0.9, 0.4], [0.45, 0.9]]]),
        job_cls=np.array([0, 0, 1], np.int32),
        job_gpus=np.ones(3, np.int32),
        job_excl=np.zeros(3, np.bool_),
    )
    base.update(kw)
    return Problem(**base)  # type: ignore[arg-type]


def test_thresholds_refuse_bad_pairs_and_say_why() -> None:
    p = _single_gpu()
    free = place(p, PackParams())
    assert list(free.node) == [0, 0, 0]  # memory allows all three
    assert free.speed[2] == pytest.approx(0.45 * 0.45)
    strict = place(p, PackParams(min_speed=0.8))
    assert list(strict.node) == [0, 0, -1] and strict.reason[2] == codes.R_INTERFERENCE
    gain = place(p, PackParams(min_gain=0.0))  # 0.9 + 0.9 > 1.0, but adding class 1 loses
    assert list(gain.node) == [0, 0, -1]


def test_thresholds_are_inclusive() -> None:
    half = np.full((1, 2, 2), 0.5)
    p = _single_gpu(speed=half, job_cls=np.array([0, 1], np.int32), job_gpus=np.ones(2, np.int32),
                    job_excl=np.zeros(2, np.bool_))  # fmt: skip
    assert list(place(p, PackParams(min_speed=0.5, min_gain=0.0)).node) == [0, 0]  # 0.5 + 0.5 == 1.0
    assert list(place(p, PackParams(min_speed=0.51)).node) == [0, -1]
    assert list(place(p, PackParams(min_gain=0.01)).node) == [0, -1]


def test_the_horus_cost_weighs_overshoot_1_6_times_idle() -> None:
    """GPU 0 would be 20 % oversubscribed (cost 0.32), GPU 1 28 % idle (0.28): GPU 1 wins."""
    p = _single_gpu(
        node_start=np.array([0, 2], np.int32),
        gpu_kind=np.zeros(2, np.int32),
        gpu_nres=np.ones(2, np.int32),
        gpu_res=np.array([[0, -1, -1], [1, -1, -1]], np.int32),
        gpu_excl=np.zeros(2, np.bool_),
        cls_mem=np.array([2000, 2000, 2000], np.int64),
        cls_util=np.array([70.0, 22.0, 10.0]),
        cls_peak=np.array([70.0, 22.0, 50.0]),
        speed=np.ones((1, 3, 3)),
        job_cls=np.array([2], np.int32),
        job_gpus=np.ones(1, np.int32),
        job_excl=np.zeros(1, np.bool_),
    )
    for impl in (place, place_reference):
        assert impl(p, PackParams()).gpus.tolist() == [1]


def test_memory_headroom_is_kept() -> None:
    p = _single_gpu(cls_mem=np.array([7830, 7830], np.int64))  # 2 x 7830 = 16160 - 500
    out = place(p, PackParams())
    assert list(out.node) == [0, -1, -1] and out.reason[1] == codes.R_MEMORY


def test_gang_needs_one_node_and_reports_the_largest_set() -> None:
    p = _single_gpu(
        node_start=np.array([0, 2, 4], np.int32),
        gpu_kind=np.zeros(4, np.int32),
        gpu_nres=np.array([0, 0, 3, 0], np.int32),
        gpu_res=np.zeros((4, 3), np.int32),
        gpu_excl=np.zeros(4, np.bool_),
        job_cls=np.array([0, 0], np.int32),
        job_gpus=np.array([3, 2], np.int32),
        job_excl=np.zeros(2, np.bool_),
    )
    out = place(p, PackParams())
    assert out.node[0] == -1 and out.reason[0] == codes.R_GANG and out.detail[0] == 2
    assert out.node[1] == 0 and sorted(out.gpus_of(1)) == [0, 1]


def test_exclusive_jobs_neither_share_nor_are_joined() -> None:
    p = _single_gpu(job_excl=np.array([True, False, False]))
    out = place(p, PackParams())
    assert list(out.node) == [0, -1, -1]
    assert out.reason[1] == codes.R_FULL
    busy = _single_gpu(job_excl=np.array([False, True, False]))
    assert place(busy, PackParams()).reason[1] == codes.R_FULL


def test_lookahead_stops_after_that_many_misses() -> None:
    p = _single_gpu(
        cls_mem=np.array([20000, 100], np.int64),
        job_cls=np.array([0, 0, 1], np.int32),
    )
    out = place(p, PackParams(lookahead=0))
    assert list(out.reason) == [codes.R_MEMORY, codes.R_LOOKAHEAD, codes.R_LOOKAHEAD]
    assert place(p, PackParams(lookahead=1)).reason[2] == codes.R_LOOKAHEAD  # 2 misses: stop
    assert place(p, PackParams(lookahead=2)).reason[2] == codes.R_PLACED


def test_horus_cost_prefers_idle_gpus_and_binpack_fills_up() -> None:
    p = _single_gpu(
        node_start=np.array([0, 2], np.int32),
        gpu_kind=np.zeros(2, np.int32),
        gpu_nres=np.zeros(2, np.int32),
        gpu_res=np.full((2, 3), -1, np.int32),
        gpu_excl=np.zeros(2, np.bool_),
        job_cls=np.array([0, 0], np.int32),
        job_gpus=np.ones(2, np.int32),
        job_excl=np.zeros(2, np.bool_),
    )
    spread = place(p, PackParams(mode=codes.MODE_HORUS))
    packed = place(p, PackParams(mode=codes.MODE_BINPACK))
    assert sorted(spread.gpus.tolist()) == [0, 1]
    assert packed.gpus.tolist() == [0, 0]


def test_empty_inputs() -> None:
    none = _single_gpu(
        job_cls=np.zeros(0, np.int32), job_gpus=np.zeros(0, np.int32), job_excl=np.zeros(0, np.bool_)
    )
    assert place(none, PackParams()).node.shape == (0,)
    no_gpus = _single_gpu(
        node_start=np.array([0], np.int32),
        gpu_kind=np.zeros(0, np.int32),
        gpu_nres=np.zeros(0, np.int32),
        gpu_res=np.zeros((0, 3), np.int32),
        gpu_excl=np.zeros(0, np.bool_),
        kind_cap=np.zeros(0, np.int64),
    )
    out = place(no_gpus, PackParams())
    assert list(out.reason) == [codes.R_NO_GPUS] * 3
    assert place_reference(no_gpus, PackParams()).same_as(out)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        place(_single_gpu(), PackParams(max_per_gpu=4))


def test_placement_result_accessors() -> None:
    out: Placement = place(_single_gpu(), PackParams())
    assert out.gpus_of(1).tolist() == [0]
    assert out.same_as(place_reference(_single_gpu(), PackParams()))
