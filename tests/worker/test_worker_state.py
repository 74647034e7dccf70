"""WorkerState: the worker's pure decisions, driven with a fake clock (no I/O, no sleeping)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from horus_core.model import JobSpec, JobState
from horus_core.testing import FakeClock
from worker.connection import Backoff
from worker.runtime.base import AttemptKey, ExitStatus
from worker.state import Phase, Send, Start, Stop, Update, WorkerState

GPUS = ("GPU-a", "GPU-b")
SPEC = JobSpec(command=("train",), job_type="ResNet-18 (batch size 32)")
K1 = AttemptKey("job-1", 1)
K2 = AttemptKey("job-2", 1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
def ws(clock: FakeClock) -> WorkerState:
    state = WorkerState(GPUS, clock, grace_s=10.0, lease_s=20.0)
    state.stream_opened()
    state.on_registered(1.0, 20.0)
    return state


def sent(effects: Sequence[object]) -> list[Update]:
    return [e.update for e in effects if isinstance(e, Send)]


def run(ws: WorkerState, key: AttemptKey = K1, gpus: tuple[str, ...] = ("GPU-a",)) -> None:
    assert ws.on_assignment(key, SPEC, gpus) == [Start(key, SPEC, gpus)]
    [update] = sent(ws.on_started(key))
    assert update.state is JobState.RUNNING


def test_assignment_starts_once_then_running(ws: WorkerState) -> None:
    assert ws.on_assignment(K1, SPEC, ("GPU-a",)) == [Start(K1, SPEC, ("GPU-a",))]
    assert ws.on_assignment(K1, SPEC, ("GPU-a",)) == []  # a copy of a known attempt is ignored
    assert ws.running() == [K1]
    [update] = sent(ws.on_started(K1))
    assert (update.key, update.state) == (K1, JobState.RUNNING)
    assert ws.on_assignment(K1, SPEC, ("GPU-a",)) == []
    assert [a.key for a in ws.live()] == [K1]


def test_final_is_sent_and_a_late_copy_gets_the_final_again(ws: WorkerState) -> None:
    run(ws)
    [final] = sent(ws.on_exited(K1, ExitStatus(JobState.SUCCEEDED, 0, "exited with code 0")))
    assert (final.state, final.exit_code) == (JobState.SUCCEEDED, 0)
    assert ws.running() == [] and ws.idle()
    assert sent(ws.on_assignment(K1, SPEC, ("GPU-a",))) == [final]  # never started twice
    assert ws.on_exited(K1, ExitStatus(JobState.FAILED, 1, "x")) == []  # one final per attempt


def test_finals_are_resent_after_each_registration(ws: WorkerState, clock: FakeClock) -> None:
    run(ws, K1)
    run(ws, K2, ("GPU-b",))
    [final] = sent(ws.on_exited(K1, ExitStatus(JobState.FAILED, 3, "exited with code 3")))
    ws.stream_closed()
    clock.advance(5)
    ws.stream_opened()
    effects = ws.on_registered(1.0, 20.0)
    updates = sent(effects)
    assert final in updates  # the final lost with the old stream arrives now
    assert [(u.key, u.state) for u in updates if u.state is JobState.RUNNING] == [(K2, JobState.RUNNING)]
    # A second Registered on the same stream is a lease renewal: nothing is re-sent.
    assert ws.on_registered(1.0, 20.0, renews_seq=ws.heartbeat_sent()) == []


def test_finals_expire_after_ttl_but_the_attempt_never_restarts(ws: WorkerState, clock: FakeClock) -> None:
    run(ws)
    ws.on_exited(K1, ExitStatus(JobState.SUCCEEDED, 0, "ok"))
    clock.advance(601)
    ws.stream_closed()
    ws.stream_opened()
    assert sent(ws.on_registered(1.0, 20.0)) == []
    assert ws.on_assignment(K1, SPEC, ("GPU-a",)) == []  # tombstone: ignored, not started
    assert K1 not in ws.attempts


def test_kill_running_then_cancelled(ws: WorkerState) -> None:
    run(ws)
    assert ws.on_kill(K1, "preempted") == [Stop(K1, "preempted", 10.0)]
    assert ws.attempts[K1].phase is Phase.STOPPING
    assert ws.on_kill(K1, "preempted") == []  # already stopping
    assert ws.running() == [K1]  # still holds its GPU until it exits
    [final] = sent(ws.on_exited(K1, ExitStatus(JobState.CANCELLED, 143, "preempted")))
    assert final.state is JobState.CANCELLED
    assert sent(ws.on_kill(K1, "again")) == [final]


def test_kill_uses_the_jobs_own_grace(ws: WorkerState) -> None:
    spec = dataclasses.replace(SPEC, grace_s=45.0)
    assert ws.on_assignment(K1, spec, ("GPU-a",)) == [Start(K1, spec, ("GPU-a",))]
    ws.on_started(K1)
    assert ws.on_kill(K1, "preempted") == [Stop(K1, "preempted", 45.0)]  # not the worker's 10 s


def test_kill_while_starting_stops_once_started(ws: WorkerState) -> None:
    ws.on_assignment(K1, SPEC, ("GPU-a",))
    assert ws.on_kill(K1, "cancelled by user") == []
    effects = ws.on_started(K1)
    assert effects == [Stop(K1, "cancelled by user", 10.0)]  # no RUNNING update for it


def test_kill_while_starting_and_start_fails_is_cancelled(ws: WorkerState) -> None:
    ws.on_assignment(K1, SPEC, ("GPU-a",))
    ws.on_kill(K1, "cancelled by user")
    [final] = sent(ws.on_start_failed(K1, "no such file"))
    assert (final.state, final.reason) == (JobState.CANCELLED, "cancelled by user")


def test_kill_of_an_unknown_attempt_is_remembered(ws: WorkerState) -> None:
    [final] = sent(ws.on_kill(K1, "cancelled by user"))
    assert final.state is JobState.CANCELLED and "before it started" in final.reason
    assert sent(ws.on_assignment(K1, SPEC, ("GPU-a",))) == [final]  # the late Assignment never starts


def test_start_failure_is_failed(ws: WorkerState) -> None:
    ws.on_assignment(K1, SPEC, ("GPU-a",))
    [final] = sent(ws.on_start_failed(K1, "[Errno 2] No such file or directory: 'train'"))
    assert final.state is JobState.FAILED and final.exit_code is None
    assert final.reason.startswith("cannot start: ")


def test_assignment_to_foreign_gpus_fails_without_starting(ws: WorkerState) -> None:
    effects = ws.on_assignment(K1, SPEC, ("GPU-a", "GPU-zzz"))
    assert not any(isinstance(e, Start) for e in effects)
    [final] = sent(effects)
    assert final.state is JobState.FAILED and "GPU-zzz" in final.reason


def test_lease_expiry_fences_all_attempts(ws: WorkerState, clock: FakeClock) -> None:
    run(ws, K1)
    run(ws, K2, ("GPU-b",))
    ws.on_assignment(AttemptKey("job-3", 2), SPEC, ("GPU-a",))  # still starting
    clock.advance(19.9)  # the stream is up, but nothing renewed the lease since the registration
    assert ws.tick() == []
    clock.advance(0.2)
    stops = ws.tick()
    assert {s.key for s in stops if isinstance(s, Stop)} == {K1, K2}
    assert all(isinstance(s, Stop) and s.reason.startswith("lease expired") for s in stops)
    assert all(isinstance(s, Stop) and s.grace_s <= 5.0 for s in stops)  # done before the master re-queues
    assert ws.tick() == []  # once
    reason = stops[0].reason if isinstance(stops[0], Stop) else ""
    assert ws.on_started(AttemptKey("job-3", 2)) == [Stop(AttemptKey("job-3", 2), reason, 10.0)]


def test_lease_counts_from_startup_and_resets_on_registration(clock: FakeClock) -> None:
    ws = WorkerState(GPUS, clock, lease_s=20.0)
    clock.advance(25)
    ws.tick()  # fenced with nothing to stop
    ws.stream_opened()
    ws.on_registered(1.0, 20.0)
    assert not ws.fenced
    run(ws)
    clock.advance(19)
    assert ws.tick() == []


def test_renewal_counts_from_when_the_heartbeat_left(ws: WorkerState, clock: FakeClock) -> None:
    """A renewal that arrives late extends the lease only to its heartbeat's send time + lease."""
    run(ws)
    clock.advance(10)
    seq = ws.heartbeat_sent()  # at t=10
    clock.advance(9)  # the answer is slow...
    ws.on_registered(1.0, 20.0, renews_seq=seq)  # ...and arrives at t=19
    assert ws.lease_deadline() == pytest.approx(clock.now() - 9 + 20)
    clock.advance(10.9)
    assert ws.tick() == []
    clock.advance(0.2)  # t = 30.1 > 10 + 20
    [stop] = ws.tick()
    assert isinstance(stop, Stop) and stop.key == K1


def test_messages_from_the_master_alone_do_not_renew(ws: WorkerState, clock: FakeClock) -> None:
    """One-way partition: the master's messages still arrive, but it does not hear the worker."""
    run(ws)
    effects: list[object] = []
    for _ in range(5):
        clock.advance(5)
        ws.heartbeat_sent()  # lost on the way
        effects += ws.on_registered(1.0, 20.0)  # a Registered that renews no heartbeat of ours
        effects += ws.on_registered(1.0, 20.0, renews_seq=999)  # nor one naming a heartbeat never sent
        effects += ws.on_kill(AttemptKey("other", 1), "x")
    effects += ws.tick()
    [stop] = [e for e in effects if isinstance(e, Stop)]  # at t=25, by the first event past the deadline
    assert stop.key == K1 and stop.reason.startswith("lease expired") and ws.fenced


def test_a_renewal_ends_the_fence_and_fenced_assignments_are_refused(
    ws: WorkerState, clock: FakeClock
) -> None:
    clock.advance(21)
    assert ws.tick() == [] and ws.fenced
    [refused] = sent(ws.on_assignment(K1, SPEC, ("GPU-a",)))  # a black hole no more: refused at once
    assert refused.state is JobState.CANCELLED and "fenced" in refused.reason
    seq = ws.heartbeat_sent()
    ws.on_registered(1.0, 20.0, renews_seq=seq)
    assert not ws.fenced
    assert ws.on_assignment(K2, SPEC, ("GPU-b",)) == [Start(K2, SPEC, ("GPU-b",))]


def test_an_attempt_killed_by_the_watchdog_is_reported_as_lease_expired(
    ws: WorkerState, clock: FakeClock
) -> None:
    run(ws)
    clock.advance(21)  # the daemon was frozen: the watchdog stopped the attempt meanwhile
    [final] = sent(ws.on_exited(K1, ExitStatus(JobState.FAILED, 143, "killed by signal SIGTERM")))
    assert final.state is JobState.CANCELLED and final.reason.startswith("lease expired")


def test_epoch_and_kill_grace_come_from_the_registration(ws: WorkerState) -> None:
    assert ws.lease_grace() == 5.0  # lease / 4 until the master says
    ws.stream_closed()
    ws.stream_opened()
    ws.on_registered(1.0, 20.0, epoch=77, kill_grace_s=2.0)
    assert (ws.epoch, ws.lease_grace()) == (77, 2.0)
    ws.stream_closed()
    ws.stream_opened()
    ws.on_registered(1.0, 20.0)
    assert ws.epoch == 77


def test_registered_updates_intervals(ws: WorkerState) -> None:
    ws.stream_opened()
    ws.on_registered(2.5, 8.0)
    assert (ws.heartbeat_interval_s, ws.lease_s) == (2.5, 8.0)
    ws.stream_opened()
    ws.on_registered(0.0, 0.0)  # unset fields keep the previous values
    assert (ws.heartbeat_interval_s, ws.lease_s) == (2.5, 8.0)


def test_shutdown_stops_everything_and_takes_no_new_work(ws: WorkerState) -> None:
    run(ws)
    assert ws.shutdown() == [Stop(K1, "worker shutting down", 10.0)]
    [refused] = sent(ws.on_assignment(K2, SPEC, ("GPU-b",)))  # refused, so the master re-queues it
    assert (refused.key, refused.state) == (K2, JobState.CANCELLED)
    assert not ws.idle()
    ws.on_exited(K1, ExitStatus(JobState.CANCELLED, 143, "worker shutting down"))
    assert ws.idle()


def test_a_death_once_shutting_down_is_a_stop_not_a_failure(ws: WorkerState) -> None:
    """Under Slurm, scancel's SIGTERM reaches the job with the worker's: a job that dies of it
    before the worker stops it is reported CANCELLED (re-queued), never FAILED (docs/slurm.md)."""
    run(ws)
    run(ws, K2, ("GPU-b",))
    [ok] = sent(ws.on_exited(K2, ExitStatus(JobState.FAILED, 1, "exited with code 1")))
    assert ok.state is JobState.FAILED  # before the shutdown: a failure is a failure
    ws.shutting_down = True  # (the signal handler sets it before the stop effects run)
    [final] = sent(ws.on_exited(K1, ExitStatus(JobState.FAILED, 143, "killed by signal SIGTERM")))
    assert final.state is JobState.CANCELLED and "worker shutting down" in final.reason
    assert "SIGTERM" in final.reason


def test_adopted_attempt_is_reported_running(ws: WorkerState) -> None:
    ws.adopt(K1, None, ())
    assert ws.running() == [K1]
    assert ws.on_assignment(K1, SPEC, ("GPU-a",)) == []
    assert ws.on_kill(K1, "stale") == [Stop(K1, "stale", 10.0)]


def test_backoff_doubles_from_0_2_to_5_s_and_resets() -> None:
    b = Backoff(jitter=0.0)
    assert [b.next() for _ in range(7)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    b.reset()
    assert b.next() == 0.2
