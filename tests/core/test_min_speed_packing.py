"""Speed floors at placement (issue 10): the kernel equals its plain twin with per-class floors,
no placement leaves anyone below their floor, and the policies' two paths agree on floors."""

from __future__ import annotations

from dataclasses import replace
from random import Random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from test_packing import FAST, params_st, problems
from test_policy_cache import SLOW, snapshots, warm_model

from horus_core.model import Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node
from horus_core.packing import PackParams, Problem, place
from horus_core.packing.assemble import assemble
from horus_core.packing.cluster import NodeCache
from horus_core.packing.jobs import JobTable
from horus_core.policies import make_policy
from horus_core.testing.kernel_twin import place_reference
from horus_core.testing.plain_problem import build_problem

FLOORS = [0.0, 0.0, 0.5, 0.7, 0.85, 1.0]


@st.composite
def floored(draw: st.DrawFn) -> Problem:
    p = draw(problems())
    n = p.cls_mem.shape[0]
    return replace(p, cls_floor=np.array(draw(st.lists(st.sampled_from(FLOORS), min_size=n, max_size=n))))


@FAST
@given(floored(), params_st)
def test_kernel_with_floors_places_exactly_like_the_reference(problem: Problem, params: PackParams) -> None:
    kernel, reference = place(problem, params), place_reference(problem, params)
    for field in ("node", "gpus", "speed", "reason", "detail"):
        np.testing.assert_array_equal(getattr(kernel, field), getattr(reference, field), err_msg=field)


def _speed_on(problem: Problem, d: int, others: list[int], t: int) -> float:
    k, out = problem.gpu_kind[d], 1.0
    for r in others:
        out *= float(problem.speed[k, t, r])
    return out


@FAST
@given(floored(), params_st)
def test_no_one_on_a_gpu_that_got_a_new_job_falls_below_their_floor(
    problem: Problem, params: PackParams
) -> None:
    out = place(problem, params)
    floors = problem.floors()
    residents = [list(problem.gpu_res[d, : problem.gpu_nres[d]]) for d in range(problem.n_gpus)]
    touched: set[int] = set()
    for j in np.flatnonzero(out.node >= 0).tolist():
        for d in out.gpus_of(j).tolist():
            residents[d].append(int(problem.job_cls[j]))
            touched.add(d)
    for d in touched:
        for i, t in enumerate(residents[d]):
            others = residents[d][:i] + residents[d][i + 1 :]
            floor = max(params.min_speed, float(floors[t]))
            assert _speed_on(problem, d, others, t) >= floor, (d, t, floor)


def test_a_floor_of_0_9_refuses_a_pair_the_default_accepts() -> None:
    gpu = Gpu("g0", "n0", 0, "Tesla V100-SXM2-16GB", 16160, "v100")
    a_type, b_type = "ResNet-18 (batch size 16)", "ResNet-50 (batch size 128)"
    running = Job("r", JobSpec(("x",), job_type=a_type), JobState.RUNNING, node="n0", gpus=("g0",))
    policy = make_policy("horus-paper")  # shares whatever fits in memory

    def decide(floor: float) -> list[object]:
        queued = Job(f"q{floor}", JobSpec(("x",), job_type=b_type, min_speed=floor), JobState.PENDING)
        return list(policy.decide(ClusterSnapshot((Node("n0", (gpu,)),), (running, queued)), 0.0))

    placed = decide(0.0)
    assert isinstance(placed[0], Assign) and placed[0].predicted_slowdown < 0.9  # they slow each other
    assert not isinstance(decide(0.9)[0], Assign)
    # the resident's floor protects it the same way
    strict = replace(running, spec=replace(running.spec, min_speed=0.9))
    q = Job("q", JobSpec(("x",), job_type=b_type), JobState.PENDING)
    got = make_policy("horus-paper").decide(ClusterSnapshot((Node("n0", (gpu,)),), (strict, q)), 0.0)
    assert not isinstance(got[0], Assign)


@SLOW
@given(snapshots(), st.randoms(use_true_random=False))
def test_assemble_computes_the_class_floors_build_problem_computes(
    snap: ClusterSnapshot, rnd: Random
) -> None:
    jobs = tuple(replace(j, spec=replace(j.spec, min_speed=rnd.choice(FLOORS))) for j in snap.jobs)
    snap = ClusterSnapshot(snap.nodes, jobs)
    model = warm_model()
    pending = snap.pending()
    positions = np.array(rnd.sample(range(len(pending)), len(pending)), np.intp)
    plain, _ = build_problem(snap, [pending[p] for p in positions], model)
    live = JobTable().scan(snap.jobs, model)
    fast, _ = assemble(NodeCache().layout(snap.nodes), live, positions, model)
    np.testing.assert_array_equal(fast.floors(), plain.floors())
