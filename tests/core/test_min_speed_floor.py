"""The pure speed-floor enforcement decision (horus_core.floor): when a floor counts as broken
for a sustained window, and which co-runner is moved."""

from __future__ import annotations

from horus_core.floor import READINGS, WINDOW_S, FloorWatch, co_runner_to_move, decide_moves, effective_floor
from horus_core.model import Job, JobSpec, JobState


def job(jid: str, gpus: tuple[str, ...], started: float, floor: float = 0.0, attempt: int = 1) -> Job:
    spec = JobSpec(("x",), min_speed=floor)
    return Job(
        jid, spec, JobState.RUNNING, attempt=attempt, started_at=started, submitted_at=started, gpus=gpus
    )


def test_the_floor_is_broken_only_after_enough_low_readings_over_the_window() -> None:
    w, slow = FloorWatch(), job("a", ("g0",), 0.0, 0.8)
    assert not w.observe(slow, 0.0, 0.5, 0.8)
    assert not w.observe(slow, 20.0, 0.5, 0.8)
    assert not w.observe(slow, 40.0, 0.5, 0.8)  # three readings, but 40 s < 60 s
    assert w.observe(slow, 60.0, 0.5, 0.8)
    assert READINGS == 3 and WINDOW_S == 60.0


def test_one_reading_at_the_floor_starts_the_count_again() -> None:
    w, slow = FloorWatch(), job("a", ("g0",), 0.0, 0.8)
    for t in (0.0, 30.0):
        w.observe(slow, t, 0.5, 0.8)
    assert not w.observe(slow, 45.0, 0.8, 0.8)
    assert not w.observe(slow, 60.0, 0.5, 0.8)
    assert not w.observe(slow, 90.0, 0.5, 0.8)
    assert w.observe(slow, 120.0, 0.5, 0.8)


def test_a_repeated_reading_time_and_a_new_attempt_do_not_count() -> None:
    w, slow = FloorWatch(), job("a", ("g0",), 0.0, 0.8)
    assert not any(w.observe(slow, 0.0, 0.1, 0.8) for _ in range(5))
    w.observe(slow, 70.0, 0.1, 0.8)
    assert not w.observe(job("a", ("g0",), 0.0, 0.8, attempt=2), 80.0, 0.1, 0.8)


def test_no_floor_means_no_enforcement_and_the_default_fills_in() -> None:
    w, j = FloorWatch(), job("a", ("g0",), 0.0)
    assert not any(w.observe(j, t, 0.01, 0.0) for t in (0.0, 60.0, 120.0, 180.0))
    assert effective_floor(j, 0.5) == 0.5 and effective_floor(job("b", (), 0.0, 0.9), 0.5) == 0.9


def test_the_youngest_co_runner_on_a_shared_gpu_is_moved() -> None:
    slow = job("a", ("g0", "g1"), 10.0, 0.8)
    old, young, elsewhere = job("b", ("g0",), 5.0), job("c", ("g1",), 50.0), job("d", ("g2",), 90.0)
    assert co_runner_to_move(slow, [slow, old, young, elsewhere]) == young
    assert co_runner_to_move(slow, [slow, elsewhere]) is None


def test_decide_moves_names_the_co_runner_with_a_reason_once() -> None:
    w = FloorWatch()
    slow, other = job("a", ("g0",), 0.0, 0.8), job("b", ("g0",), 30.0)
    active = [slow, other]
    assert decide_moves(w, active, {"a": 0.4, "b": 0.9}, 0.0, 0.0) == []
    assert decide_moves(w, active, {"a": 0.4}, 30.0, 0.0) == []
    moves = decide_moves(w, active, {"a": 0.4}, 60.0, 0.0)
    assert [v.id for v, _ in moves] == ["b"]
    assert "job a" in moves[0][1] and "0.40x" in moves[0][1] and "0.8x" in moves[0][1]
    assert decide_moves(w, active, {"a": 0.4}, 61.0, 0.0) == []  # its count started again


def test_the_cluster_default_floor_is_enforced_for_jobs_without_one() -> None:
    w = FloorWatch()
    slow, other = job("a", ("g0",), 0.0), job("b", ("g0",), 30.0)
    for t in (0.0, 30.0):
        decide_moves(w, [slow, other], {"a": 0.3}, t, 0.5)
    assert [v.id for v, _ in decide_moves(w, [slow, other], {"a": 0.3}, 60.0, 0.5)] == ["b"]


def test_a_co_runner_is_not_moved_before_its_minimum_run_time() -> None:
    w = FloorWatch()
    slow, other = job("a", ("g0",), 0.0, 0.8), job("b", ("g0",), 30.0)
    for t in (0.0, 30.0):
        decide_moves(w, [slow, other], {"a": 0.4}, t, 0.0, min_run_s=40.0)
    assert decide_moves(w, [slow, other], {"a": 0.4}, 60.0, 0.0, min_run_s=40.0) == []  # b ran 30 s
    moves = decide_moves(w, [slow, other], {"a": 0.4}, 70.0, 0.0, min_run_s=40.0)
    assert [v.id for v, _ in moves] == ["b"]  # the slow job kept its count: b is moved at 40 s


def test_the_minimum_run_time_leaves_an_older_co_runner_movable() -> None:
    w = FloorWatch()
    slow = job("a", ("g0", "g1"), 0.0, 0.8)
    old, young, waiting = job("b", ("g0",), 5.0), job("c", ("g1",), 50.0), job("d", ("g1",), 0.0)
    waiting = Job("d", waiting.spec, JobState.ASSIGNED, attempt=1, submitted_at=0.0, gpus=("g1",))
    active = [slow, old, young, waiting]
    for t in (0.0, 30.0):
        decide_moves(w, active, {"a": 0.4}, t, 0.0, min_run_s=20.0)
    assert [v.id for v, _ in decide_moves(w, active, {"a": 0.4}, 60.0, 0.0, min_run_s=20.0)] == ["b"]
