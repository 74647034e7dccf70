"""Gavel's LPs on inputs small enough to solve by hand, and the class grouping against the
ungrouped LP."""

from __future__ import annotations

import numpy as np
import pytest

from horus_core.model import Job, JobSpec, JobState
from horus_core.policies.gavel.classes import Problem, build_problem, job_throughputs, weight_of
from horus_core.policies.gavel.lp import Pairs
from horus_core.policies.gavel.objectives import Members, solve_ftf, solve_makespan, solve_max_min
from horus_core.policies.gavel.pairs import choose_pairs

SOLO = {
    ("fast-on-v100", "k80"): 1.0,
    ("fast-on-v100", "v100"): 4.0,
    ("bit-faster", "k80"): 1.0,
    ("bit-faster", "v100"): 2.0,
    ("v100-only", "v100"): 3.0,
    ("flat", "k80"): 1.0,
    ("flat", "v100"): 1.0,
}


def solo(job_type: str, gpus: int, gpu_type: str) -> float | None:
    return SOLO.get((job_type, gpu_type))


def job(job_id: str, job_type: str, gpus: int = 1, priority: int = 0, steps: int = 0) -> Job:
    spec = JobSpec(("x",), gpus=gpus, job_type=job_type, priority=priority, total_steps=steps)
    return Job(job_id, spec, JobState.PENDING)


def problem(jobs: list[Job], capacity: dict[str, int], agnostic: bool = False, group: bool = True) -> Problem:
    return build_problem(jobs, capacity, solo, lambda j: j.spec.job_type, agnostic, group)


def test_weights_follow_priority() -> None:
    assert [weight_of(p) for p in (-3, -1, 0, 1, 2)] == [0.25, 0.5, 1.0, 2.0, 3.0]


def test_throughput_row_zero_where_a_job_cannot_run_and_ones_where_nothing_is_known() -> None:
    assert job_throughputs("v100-only", 1, ("k80", "v100"), solo, agnostic=False) == [0.0, 3.0]
    assert job_throughputs("v100-only", 1, ("k80", "v100"), solo, agnostic=True) == [0.0, 1.0]
    assert job_throughputs("unknown", 1, ("k80", "v100"), solo, agnostic=False) == [1.0, 1.0]


def test_max_min_perf_two_jobs_two_types_hand_solved() -> None:
    # Normalised by the mean over the two GPUs: A = (0.4, 1.6), B = (2/3, 4/3). Both jobs at
    # 1.0 needs x = 0.5 of the V100 each (1.6 - 1.2x = 2/3 + 2x/3), and nothing does better.
    p = problem([job("a", "fast-on-v100"), job("b", "bit-faster")], {"k80": 1, "v100": 1})
    sol, _ = solve_max_min(p, Pairs.none(2))
    assert sol.s == pytest.approx(1.0, abs=1e-5)
    assert sol.single == pytest.approx(np.array([[0.5, 0.5], [0.5, 0.5]]), abs=1e-5)


def test_agnostic_counts_time_not_speed() -> None:
    p = problem([job("a", "fast-on-v100"), job("b", "bit-faster")], {"k80": 1, "v100": 1}, agnostic=True)
    sol, _ = solve_max_min(p, Pairs.none(2))
    assert sol.s == pytest.approx(1.0, abs=1e-5)  # each job runs all the time, on one GPU or the other
    assert sol.single.sum(axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)


def test_weights_split_one_gpu_in_proportion() -> None:
    p = problem([job("a", "flat"), job("b", "flat", priority=2)], {"v100": 1})
    sol, _ = solve_max_min(p, Pairs.none(1))
    assert sol.single[:, 0] == pytest.approx([0.25, 0.75], abs=1e-5)


def test_a_type_a_job_cannot_use_gets_nothing_even_when_idle() -> None:
    p = problem([job("a", "v100-only"), job("b", "v100-only")], {"k80": 4, "v100": 1})
    sol, splits = solve_max_min(p, Pairs.none(2))
    assert sol.single[0, 0] == 0.0
    assert sol.single[0, 1] == pytest.approx(1.0, abs=1e-5)
    assert list(splits[0]) == [0.5, 0.5]


def test_gpu_share_fairness_then_spare_capacity_goes_to_who_can_use_it() -> None:
    # 4 GPUs: the 4-GPU job is owed 4x the time-weighted GPUs (z = 1 with it at 0.25, the
    # 1-GPU job at 1.0); stage 2 then gives it the 3 GPUs left: 0.75.
    p = problem([job("big", "flat", gpus=4), job("small", "fast-on-v100")], {"v100": 4})
    sol, _ = solve_max_min(p, Pairs.none(1))
    assert sol.s == pytest.approx(1.0, abs=1e-5)
    assert sol.single[:, 0] == pytest.approx([0.75, 1.0], abs=1e-5)


def test_makespan_one_gpu_two_jobs_of_one_class() -> None:
    p = problem([job("a", "flat"), job("b", "flat")], {"v100": 1})
    members = Members([np.array([100.0, 300.0])], [np.zeros(2)])
    sol, splits = solve_makespan(p, members)
    assert sol.s == pytest.approx(1.0, abs=1e-5)  # makespan = T0 / s = 400 s, the total work
    assert sol.single[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert list(splits[0]) == pytest.approx([0.25, 0.75])


def test_makespan_sends_the_job_that_gains_most_to_the_fast_type() -> None:
    p = problem([job("a", "fast-on-v100"), job("b", "flat")], {"k80": 1, "v100": 1})
    members = Members([np.array([400.0]), np.array([100.0])], [np.zeros(1), np.zeros(1)])
    sol, _ = solve_makespan(p, members)
    # a alone on the V100: 100 s; b on the K80: 100 s. Any other split is slower for one of them.
    assert sol.single == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-5)


def test_ftf_equal_jobs_share_equally() -> None:
    p = problem([job("a", "flat"), job("b", "flat")], {"v100": 1})
    sol, splits, _ = solve_ftf(p, Members([np.array([100.0, 100.0])], [np.zeros(2)]))
    assert list(splits[0]) == pytest.approx([0.5, 0.5], abs=1e-3)
    assert sol.single[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_ftf_favours_the_job_the_fast_type_helps_most() -> None:
    # Each job's fair finish assumes an equal share of both GPUs; the V100 helps "a" 4x, "b" 2x.
    p = problem([job("a", "fast-on-v100"), job("b", "bit-faster")], {"k80": 1, "v100": 1})
    sol, _, _ = solve_ftf(p, Members([np.array([100.0]), np.array([100.0])], [np.zeros(1), np.zeros(1)]))
    assert sol.single[0, 1] > sol.single[1, 1]


def test_ftf_rejects_nothing_when_the_cluster_is_large() -> None:
    p = problem([job("a", "flat")], {"v100": 8})
    sol, _, _ = solve_ftf(p, Members([np.array([50.0])], [np.array([10.0])]))
    assert sol.single[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_packed_pairs_raise_the_floor_when_sharing_beats_taking_turns() -> None:
    jobs = [job("a", "flat"), job("b", "bit-faster")]
    p = problem(jobs, {"v100": 1})
    alone, _ = solve_max_min(p, Pairs.none(1))
    pairs = choose_pairs(p, lambda a, b, t: (0.8, 0.7))
    assert len(pairs) == 1
    packed, _ = solve_max_min(p, pairs)
    # Alone, taking turns: 0.5 each. Paired a fraction p and b alone for the rest:
    # 0.8 p = 0.7 p + (1 - p), so p = 10/11 and both reach 8/11 of their solo speed.
    assert alone.s == pytest.approx(0.5, abs=1e-5)
    assert packed.s == pytest.approx(8 / 11, abs=1e-5)
    assert packed.paired[0, 0] == pytest.approx(10 / 11, abs=1e-5)


def test_pairs_slower_than_taking_turns_are_not_rows() -> None:
    p = problem([job("a", "flat"), job("b", "bit-faster")], {"v100": 1})
    assert len(choose_pairs(p, lambda a, b, t: (0.5, 0.4))) == 0


def floored(job_id: str, job_type: str, min_speed: float) -> Job:
    spec = JobSpec(("x",), job_type=job_type, min_speed=min_speed)
    return Job(job_id, spec, JobState.PENDING)


@pytest.mark.parametrize(
    ("floor_a", "floor_b", "rows"), [(0.0, 0.0, 1), (0.8, 0.0, 1), (0.0, 0.75, 0), (0.85, 0.0, 0)]
)
def test_a_pair_below_either_jobs_floor_is_not_a_row(floor_a: float, floor_b: float, rows: int) -> None:
    # a runs at 0.8x next to b, b at 0.7x next to a: a floor above its side's speed drops the row.
    p = problem([floored("a", "flat", floor_a), floored("b", "bit-faster", floor_b)], {"v100": 1})
    assert len(choose_pairs(p, lambda x, y, t: (0.8, 0.7) if x == "flat" else (0.7, 0.8))) == rows


def test_the_floor_of_a_signature_is_its_strictest_class() -> None:
    # Two classes of "flat" (floors 0 and 0.9): a round may seat a "bit-faster" job next to
    # either, so no pair with "flat" at 0.8x is offered at all.
    jobs = [floored("a", "flat", 0.0), floored("a2", "flat", 0.9), floored("b", "bit-faster", 0.0)]
    p = problem(jobs, {"v100": 1})
    assert len(p.classes) == 3
    pairs = choose_pairs(p, lambda x, y, t: (0.8, 0.7) if x == "flat" else (0.7, 0.8))
    sig = [c.signature for c in p.classes]
    names = {(sig[int(a)], sig[int(b)]) for a, b in zip(pairs.first, pairs.second, strict=True)}
    assert ("flat", "bit-faster") not in names and ("bit-faster", "flat") not in names


def _random_jobs(rng: np.random.Generator, n: int) -> list[Job]:
    kinds = ["fast-on-v100", "bit-faster", "flat", "v100-only"]
    return [
        job(
            f"j{i}",
            kinds[int(rng.integers(len(kinds)))],
            gpus=int(rng.choice([1, 2])),
            priority=int(rng.integers(2)),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("seed", range(6))
def test_grouping_keeps_the_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs = _random_jobs(rng, 9)
    caps = {"k80": int(rng.integers(1, 5)), "v100": int(rng.integers(1, 5))}
    grouped, ungrouped = problem(jobs, caps), problem(jobs, caps, group=False)
    assert len(grouped.classes) < len(ungrouped.classes) == 9
    g_sol, _ = solve_max_min(grouped, Pairs.none(2))
    u_sol, _ = solve_max_min(ungrouped, Pairs.none(2))
    assert g_sol.s == pytest.approx(u_sol.s, rel=1e-5)
    # the same total normalised GPU throughput, and the same GPUs in use per type
    assert _gain(grouped, g_sol.single) == pytest.approx(_gain(ungrouped, u_sol.single), rel=1e-5)
    assert (grouped.gpus @ g_sol.single) == pytest.approx(ungrouped.gpus @ u_sol.single, abs=1e-5)


def test_grouping_allocations_equal_per_class_where_the_optimum_is_unique() -> None:
    jobs = [
        job("a1", "fast-on-v100"),
        job("b1", "bit-faster"),
        job("a2", "fast-on-v100"),
        job("b2", "bit-faster"),
    ]
    caps = {"k80": 2, "v100": 2}
    g_sol, _ = solve_max_min(problem(jobs, caps), Pairs.none(2))
    u_sol, _ = solve_max_min(problem(jobs, caps, group=False), Pairs.none(2))
    per_class = np.array([u_sol.single[0] + u_sol.single[2], u_sol.single[1] + u_sol.single[3]])
    assert g_sol.single == pytest.approx(per_class, abs=1e-5)
    assert g_sol.single == pytest.approx(np.array([[1.0, 1.0], [1.0, 1.0]]), abs=1e-5)


def _gain(p: Problem, single: np.ndarray) -> float:
    mean = (p.throughput * p.capacity).sum(axis=1) / p.capacity.sum()
    return float((p.gpus[:, None] * p.throughput / mean[:, None] * single).sum())


def test_stage_one_alone_keeps_the_objective_but_not_the_spare_capacity() -> None:
    p = problem([job("big", "flat", gpus=4), job("small", "fast-on-v100")], {"v100": 4})
    sol, _ = solve_max_min(p, Pairs.none(1), second_stage=False)
    assert sol.s == pytest.approx(1.0, abs=1e-5)
    assert float(p.gpus @ sol.single[:, 0]) <= 4.0 + 1e-6
