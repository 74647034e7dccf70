"""WorkerState across a lease lapse: exits are judged by when they happened, not by the lease now.

The lease watchdog (a separate process) signals every attempt once the deadline has passed; the
daemon hears of that only when the attempt's exit reaches it, which may be after a renewal that
ended the lapse. Driven with a fake clock; the lease runs out at t=1020 (registered at t=1000).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from horus_core.model import JobSpec, JobState
from horus_core.testing import FakeClock
from worker.runtime.base import AttemptKey, ExitStatus
from worker.state import Effect, Send, Start, Stop, Update, WorkerState

SPEC = JobSpec(command=("train",))
K1 = AttemptKey("job-1", 1)
K2 = AttemptKey("job-2", 1)
DEADLINE = 1020.0
SIGTERMED = ExitStatus(JobState.FAILED, 143, "killed by signal SIGTERM")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
def ws(clock: FakeClock) -> WorkerState:
    state = WorkerState(("GPU-a", "GPU-b"), clock, grace_s=10.0, lease_s=20.0)
    state.stream_opened()
    state.on_registered(1.0, 20.0)
    for key, gpu in ((K1, "GPU-a"), (K2, "GPU-b")):
        assert state.on_assignment(key, SPEC, (gpu,)) == [Start(key, SPEC, (gpu,))]
        state.on_started(key)
    return state


def finals(effects: Sequence[Effect]) -> list[Update]:
    return [e.update for e in effects if isinstance(e, Send)]


def stopped(effects: Sequence[Effect]) -> set[AttemptKey]:
    return {e.key for e in effects if isinstance(e, Stop)}


def late_renewal(ws: WorkerState, clock: FakeClock, sent_at: float, now: float) -> list[Effect]:
    """A heartbeat sent at ``sent_at`` whose renewal is handled at ``now``."""
    clock.advance(sent_at - clock.now())
    seq = ws.heartbeat_sent()
    clock.advance(now - clock.now())
    return ws.on_registered(1.0, 20.0, renews_seq=seq)


def test_watchdog_kill_then_renewal_then_exit_is_the_lease_case(ws: WorkerState, clock: FakeClock) -> None:
    """The race of the flaky pause fault: no tick between the deadline and the renewal."""
    effects = late_renewal(ws, clock, sent_at=1019.0, now=1021.0)
    assert stopped(effects) == {K1, K2}  # the lapse still stops everything, as the watchdog did
    assert not ws.fenced and ws.lease_deadline() == 1039.0  # and the renewal ends the fence
    [final] = finals(ws.on_exited(K1, SIGTERMED, exited_at=1020.1))
    assert (final.state, final.exit_code) == (JobState.CANCELLED, 143)
    assert final.reason == "lease expired: stopped by the lease watchdog"


def test_exit_after_a_renewal_that_followed_a_tick_fence_is_the_lease_case(
    ws: WorkerState, clock: FakeClock
) -> None:
    """The daemon fenced in time, but the watchdog's SIGTERM beat the runtime's stop: the runtime
    reports a plain signal death, and a renewal came before the exit was handled."""
    clock.advance(20.2)
    assert stopped(ws.tick()) == {K1, K2}
    assert stopped(late_renewal(ws, clock, sent_at=1019.5, now=1020.5)) == set()  # once a lapse
    assert not ws.fenced
    clock.advance(0.4)
    [final] = finals(ws.on_exited(K1, SIGTERMED))  # exited_at defaults to now (1020.9)
    assert final.state is JobState.CANCELLED and final.reason.startswith("lease expired")


def test_the_daemons_own_stop_keeps_its_reason(ws: WorkerState, clock: FakeClock) -> None:
    clock.advance(20.5)
    [stop, _] = [e for e in ws.tick() if isinstance(e, Stop)]
    status = ExitStatus(JobState.CANCELLED, 143, stop.reason)
    [final] = finals(ws.on_exited(stop.key, status, exited_at=1020.6))
    assert (final.state, final.reason) == (JobState.CANCELLED, stop.reason)


def test_a_real_failure_after_an_in_time_renewal_stays_failed(ws: WorkerState, clock: FakeClock) -> None:
    assert late_renewal(ws, clock, sent_at=1015.0, now=1019.0) == []  # before the deadline: no lapse
    clock.advance(10)  # t=1029, after the first deadline, before the renewed one (1035)
    assert ws.tick() == []
    [final] = finals(ws.on_exited(K1, ExitStatus(JobState.FAILED, 3, "exited with code 3")))
    assert (final.state, final.exit_code, final.reason) == (JobState.FAILED, 3, "exited with code 3")


def test_an_attempt_started_after_a_lapse_keeps_its_own_failure(ws: WorkerState, clock: FakeClock) -> None:
    late_renewal(ws, clock, sent_at=1019.0, now=1021.0)
    k3 = AttemptKey("job-3", 1)
    assert ws.on_assignment(k3, SPEC, ("GPU-a",)) == [Start(k3, SPEC, ("GPU-a",))]
    ws.on_started(k3)
    clock.advance(1)
    [final] = finals(ws.on_exited(k3, SIGTERMED))  # lived through no lapse: a real signal death
    assert (final.state, final.reason) == (JobState.FAILED, "killed by signal SIGTERM")


def test_an_exit_before_the_deadline_handled_during_the_lapse_keeps_its_result(
    ws: WorkerState, clock: FakeClock
) -> None:
    """Not the watchdog's (it acts only after the deadline), though handled after it: its own
    result; the lapse, seen first by this event, still stops the other attempt."""
    clock.advance(20.5)
    effects = ws.on_exited(K1, ExitStatus(JobState.FAILED, 3, "exited with code 3"), exited_at=1019.8)
    assert stopped(effects) == {K2}  # no Stop for the attempt that has just ended
    [final] = finals(effects)
    assert (final.key, final.state, final.exit_code) == (K1, JobState.FAILED, 3)
    assert ws.fenced


def test_an_exit_during_the_lapse_is_the_lease_case_whatever_its_code(
    ws: WorkerState, clock: FakeClock
) -> None:
    """After the deadline a job may be answering the watchdog's SIGTERM: even exit code 0 is not
    reported as a success (the master re-queues it), before or after the renewal."""
    clock.advance(20.3)
    [final] = finals(ws.on_exited(K1, ExitStatus(JobState.SUCCEEDED, 0, "exited with code 0")))
    assert (final.state, final.exit_code) == (JobState.CANCELLED, 0)
    late_renewal(ws, clock, sent_at=1019.5, now=1020.6)
    [final] = finals(ws.on_exited(K2, ExitStatus(JobState.SUCCEEDED, 0, "ok"), exited_at=1020.4))
    assert final.state is JobState.CANCELLED and final.reason.startswith("lease expired")


def test_an_assignment_during_an_unseen_lapse_is_refused(ws: WorkerState, clock: FakeClock) -> None:
    clock.advance(20.1)  # no tick yet: the assignment is the first event past the deadline
    k3 = AttemptKey("job-3", 1)
    effects = ws.on_assignment(k3, SPEC, ("GPU-a",))
    assert stopped(effects) == {K1, K2}
    [refused] = finals(effects)
    assert (refused.key, refused.state) == (k3, JobState.CANCELLED) and "fenced" in refused.reason


def test_a_start_confirmed_during_an_unseen_lapse_is_stopped(clock: FakeClock) -> None:
    ws = WorkerState(("GPU-a",), clock, lease_s=20.0)
    ws.stream_opened()
    ws.on_registered(1.0, 20.0)
    ws.on_assignment(K1, SPEC, ("GPU-a",))
    clock.advance(20.1)
    [stop] = ws.on_started(K1)  # not reported RUNNING: stopped at once
    assert isinstance(stop, Stop) and stop.key == K1 and stop.reason.startswith("lease expired")
    [final] = finals(ws.on_exited(K1, SIGTERMED))
    assert final.state is JobState.CANCELLED
