"""The worker's decisions as a pure state machine: no I/O, no asyncio, time from an injected clock.

:class:`WorkerState` knows every attempt this worker has been given, in which phase it is, and the
final updates of the last ``finals_ttl_s`` (re-sent after each registration). Each event method
returns the effects the I/O shell (:mod:`worker.agent`) must carry out: :class:`Start` an attempt,
:class:`Stop` one (SIGTERM, SIGKILL after ``grace_s``) or :class:`Send` an update to the master.

The rules (docs/protocol.md): an Assignment starts its attempt once (a copy of a known attempt is
ignored, or answered with its final when it already finished); a Kill stops it and its final is
CANCELLED; cut off from the master for longer than ``lease_s``, the worker stops all its attempts
itself ("lease expired") before the master could re-queue them, so an attempt never runs twice.

The lease counts only from evidence that the master heard this worker: the send time of the
Register it answered, or of the heartbeat a renewal names (``renews_seq``). Messages merely
arriving from the master renew nothing (a one-way partition must not keep the lease alive). A
renewal ends the fence; an Assignment that comes while fenced is refused with a CANCELLED final,
so the master re-queues it at once instead of waiting on a worker that will never start it.

A lapse is judged by when things happened, not by the lease's state when an event is handled:
every event first catches up with a lapse the ticks have not seen yet (so a renewal that comes
after the deadline still stops every attempt, as the watchdog does), each attempt remembers the
deadline it lived through (``lapsed_at``), and an exit seen at or after that deadline is the lease
case (CANCELLED) whatever the runtime reports and whether or not a renewal came since.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from horus_core.containment import CAUSE_GPU_MEMORY_EXCEEDED, Ending
from horus_core.model import JobSpec, JobState
from worker.runtime.base import AttemptKey, ExitStatus


class Clock(Protocol):
    def monotonic(self) -> float: ...  # for deadlines
    def time(self) -> float: ...  # unix seconds, for the ``at`` of updates


NO_ENDING = Ending()
Env = tuple[tuple[str, str], ...]


class Phase(enum.Enum):
    STARTING = "STARTING"  # Start handed to the runtime, not confirmed yet
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"  # Stop handed to the runtime
    FINISHED = "FINISHED"  # final update known


@dataclass(frozen=True, slots=True)
class Update:
    """An AttemptUpdate: RUNNING or a final state."""

    key: AttemptKey
    state: JobState
    exit_code: int | None = None
    reason: str = ""
    at: float = 0.0
    ending: Ending = NO_ENDING  # a final's sharing facts: cause, peak GPU memory, shared


@dataclass(frozen=True, slots=True)
class Start:
    key: AttemptKey
    spec: JobSpec
    gpus: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # what the master's assignment adds (a gang's rendezvous)
    cap_mib: int = 0  # the GPU memory cap per GPU the worker enforces (0: none), docs/sharing.md


@dataclass(frozen=True, slots=True)
class Stop:
    key: AttemptKey
    reason: str
    grace_s: float


@dataclass(frozen=True, slots=True)
class Send:
    update: Update


Effect = Start | Stop | Send


@dataclass(slots=True)
class Attempt:
    key: AttemptKey
    spec: JobSpec | None  # None for an attempt killed before it was ever assigned here
    gpus: tuple[str, ...]
    phase: Phase
    stop_reason: str | None = None  # a stop asked for while STARTING is carried out once started
    final: Update | None = None
    finished_at: float = 0.0  # monotonic
    lapsed_at: float | None = None  # the lease deadline that passed while it lived (monotonic)
    cap_mib: int = 0  # its GPU memory cap per GPU (0: none)
    cause: str = ""  # why this worker stopped it, where that is a sharing cause (GpuMemoryExceeded)

    @property
    def capped(self) -> bool:
        """Its memory is held to its cap: a cap was given and the job shares its GPUs."""
        return self.cap_mib > 0 and self.spec is not None and not self.spec.exclusive


class WorkerState:
    def __init__(
        self,
        gpu_uuids: Iterable[str],
        clock: Clock,
        *,
        grace_s: float = 10.0,
        lease_s: float = 20.0,
        heartbeat_interval_s: float = 5.0,
        finals_ttl_s: float = 600.0,
        max_tombstones: int = 4096,
    ) -> None:
        self.gpu_uuids = frozenset(gpu_uuids)
        self.clock = clock
        self.grace_s = grace_s
        self.lease_s = lease_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.finals_ttl_s = finals_ttl_s
        self.attempts: dict[AttemptKey, Attempt] = {}
        self.registered = False  # a stream is open and the master answered Registered on it
        self.fenced = False
        self.epoch = 0  # of the last registration; presented as Register.resume_epoch
        self.kill_grace_s = 0.0  # the master's grace for lease-expiry stops (0: lease_s / 4)
        self.shutting_down = False
        self.last_contact = clock.monotonic()  # the lease counts from here
        self._register_sent_at = self.last_contact
        self._heartbeats: OrderedDict[int, float] = OrderedDict()  # seq -> when it was sent
        self._seq = 0
        self._tombstones: OrderedDict[AttemptKey, None] = OrderedDict()
        self._max_tombstones = max_tombstones

    # ------------------------------------------------------------------------- the stream

    def stream_opened(self) -> None:
        """A Register is about to be sent on a new stream."""
        self.registered = False
        self._register_sent_at = self.clock.monotonic()

    def on_registered(
        self,
        heartbeat_interval_s: float,
        lease_s: float,
        *,
        epoch: int = 0,
        renews_seq: int = 0,
        kill_grace_s: float = 0.0,
    ) -> list[Effect]:
        """Registered: the first one on a stream re-sends RUNNING and the recent finals; a later
        one naming a heartbeat (``renews_seq``) renews the lease from when that heartbeat left."""
        if heartbeat_interval_s > 0:
            self.heartbeat_interval_s = heartbeat_interval_s
        if lease_s > 0:
            self.lease_s = lease_s
        if kill_grace_s > 0:
            self.kill_grace_s = kill_grace_s
        effects = self._check_lease()  # a renewal after the deadline does not undo the lapse
        if self.registered:
            sent = self._heartbeats.get(renews_seq) if renews_seq else None
            if sent is not None:
                self._renew(sent)
            return effects
        self.registered = True
        self.epoch = epoch or self.epoch
        self._renew(self._register_sent_at)
        self.prune()
        now = self.clock.time()
        effects += [Send(Update(a.key, JobState.RUNNING, at=now)) for a in self._in(Phase.RUNNING)]
        effects += [Send(f) for f in self.finals()]
        return effects

    def heartbeat_sent(self) -> int:
        """A heartbeat is about to be sent: its sequence number (remembered with the time)."""
        self._seq += 1
        self._heartbeats[self._seq] = self.clock.monotonic()
        while len(self._heartbeats) > 64:
            self._heartbeats.popitem(last=False)
        return self._seq

    def stream_closed(self) -> None:
        self.registered = False

    def lease_deadline(self) -> float:
        """Monotonic time at which the lease runs out unless renewed."""
        return self.last_contact + self.lease_s

    def lease_grace(self) -> float:
        """SIGTERM -> SIGKILL grace of attempts stopped because the lease ran out."""
        return min(self.grace_s, self.kill_grace_s or self.lease_s / 4)

    def tick(self) -> list[Effect]:
        """Call often: prunes old finals, fences when the lease ran out."""
        self.prune()
        return self._check_lease()

    def _check_lease(self) -> list[Effect]:
        """Once the deadline has passed (once a lapse): fence, and stop every attempt, each
        remembering the deadline it lived through. Every event calls it first, so whatever the
        order of a lapse's events, they are judged as if a tick had run at the deadline."""
        now, deadline = self.clock.monotonic(), self.lease_deadline()
        if self.fenced or now <= deadline:
            return []
        self.fenced = True
        for attempt in self.attempts.values():
            if attempt.phase is not Phase.FINISHED and attempt.lapsed_at is None:
                attempt.lapsed_at = deadline
        reason = f"lease expired: no renewal from the master for {now - self.last_contact:.0f} s"
        return self._stop_all(reason, self.lease_grace())

    def _renew(self, sent_at: float) -> None:
        if sent_at > self.last_contact:
            self.last_contact = sent_at
        if self.fenced and self.clock.monotonic() - self.last_contact <= self.lease_s:
            self.fenced = False  # the master heard us again: take work again

    # -------------------------------------------------------------------- from the master

    def on_assignment(
        self, key: AttemptKey, spec: JobSpec, gpus: tuple[str, ...], env: Env = (), cap_mib: int = 0
    ) -> list[Effect]:
        return self._check_lease() + self._assignment(key, spec, gpus, env, cap_mib)

    def _assignment(
        self, key: AttemptKey, spec: JobSpec, gpus: tuple[str, ...], env: Env, cap_mib: int = 0
    ) -> list[Effect]:
        known = self.attempts.get(key)
        if known is not None:  # a copy: started once only; a finished one gets its final again
            return [Send(known.final)] if known.final is not None else []
        if key in self._tombstones:
            return []
        attempt = Attempt(key, spec, gpus, Phase.STARTING, cap_mib=max(0, cap_mib))
        self.attempts[key] = attempt
        if self.shutting_down or self.fenced:  # refused at once: the master re-queues it
            why = "worker shutting down" if self.shutting_down else "worker fenced: its lease expired"
            return self._finish(attempt, JobState.CANCELLED, None, f"{why} (not started)")
        foreign = sorted(set(gpus) - self.gpu_uuids)
        if not gpus or foreign:
            what = f"GPUs not on this worker: {', '.join(foreign)}" if foreign else "no GPUs"
            return self._finish(attempt, JobState.FAILED, None, f"bad assignment: {what}")
        return [Start(key, spec, gpus, env, attempt.cap_mib)]

    def on_kill(self, key: AttemptKey, reason: str) -> list[Effect]:
        return self._check_lease() + self._kill(key, reason or "killed by the master")

    def _kill(self, key: AttemptKey, reason: str) -> list[Effect]:
        attempt = self.attempts.get(key)
        if attempt is None:
            if key in self._tombstones:
                return []
            # Never assigned here (or its Assignment was lost): remember it, so a late copy never starts.
            attempt = self.attempts[key] = Attempt(key, None, (), Phase.STARTING)
            return self._finish(attempt, JobState.CANCELLED, None, f"{reason} (before it started)")
        if attempt.phase is Phase.FINISHED:
            return [Send(attempt.final)] if attempt.final is not None else []
        return self._stop(attempt, reason, self.job_grace(attempt))

    def on_over_cap(self, key: AttemptKey, reason: str) -> list[Effect]:
        """The memory watchdog saw the attempt above its cap: stop it; its final names the cause."""
        effects = self._check_lease()
        attempt = self.attempts.get(key)
        if attempt is None or attempt.phase is not Phase.RUNNING or not attempt.capped:
            return effects
        attempt.cause = CAUSE_GPU_MEMORY_EXCEEDED
        return effects + self._stop(attempt, reason, self.job_grace(attempt))

    def job_grace(self, attempt: Attempt) -> float:
        """SIGTERM -> SIGKILL grace of a stop the master asked for: the job's ``grace_s``, or
        the worker's ``--grace-s`` when the spec leaves it 0."""
        spec = attempt.spec
        return spec.grace_s if spec is not None and spec.grace_s > 0 else self.grace_s

    # ------------------------------------------------------------------- from the runtime

    def adopt(self, key: AttemptKey, spec: JobSpec | None, gpus: tuple[str, ...]) -> None:
        """An attempt a previous life of this worker left running that the runtime re-attached;
        it is reported in Register, and the master kills it unless it is still current."""
        if key not in self.attempts:
            self.attempts[key] = Attempt(key, spec, gpus, Phase.RUNNING)

    def on_started(self, key: AttemptKey) -> list[Effect]:
        effects = self._check_lease()  # a start during a lapse is stopped at once
        attempt = self.attempts.get(key)
        if attempt is None or attempt.phase is not Phase.STARTING:
            return effects
        attempt.phase = Phase.RUNNING
        if attempt.stop_reason is not None:
            return effects + self._stop(attempt, attempt.stop_reason, self.job_grace(attempt))
        return [*effects, Send(Update(key, JobState.RUNNING, at=self.clock.time()))]

    def on_start_failed(self, key: AttemptKey, error: str) -> list[Effect]:
        effects = self._check_lease()
        attempt = self.attempts.get(key)
        if attempt is None or attempt.phase is Phase.FINISHED:
            return effects
        if attempt.stop_reason is not None:
            return effects + self._finish(attempt, JobState.CANCELLED, None, attempt.stop_reason)
        return effects + self._finish(attempt, JobState.FAILED, None, f"cannot start: {error}")

    def on_exited(
        self,
        key: AttemptKey,
        status: ExitStatus,
        exited_at: float | None = None,
        ending: Ending = NO_ENDING,
    ) -> list[Effect]:
        """The runtime saw the attempt end at ``exited_at`` (monotonic; None: now). An exit at or
        after a lease deadline the attempt lived through is the lease case (the watchdog signals
        every attempt once the deadline has passed, and a job may answer SIGTERM with any code),
        even when a renewal came between the kill and this call; one before it keeps its result.
        ``ending``: its sharing facts; a stop by the memory watchdog is its cause, whatever the exit."""
        effects = [e for e in self._check_lease() if not (isinstance(e, Stop) and e.key == key)]
        attempt = self.attempts.get(key)
        if attempt is None or attempt.phase is Phase.FINISHED:
            return effects
        at = self.clock.monotonic() if exited_at is None else exited_at
        lapsed = attempt.lapsed_at is not None and at >= attempt.lapsed_at
        if lapsed and status.state is not JobState.CANCELLED:  # the watchdog got there first
            why = "lease expired: stopped by the lease watchdog"
            return effects + self._finish(attempt, JobState.CANCELLED, status.exit_code, why)
        if status.state is JobState.FAILED and self.shutting_down:
            # It died once the worker was told to stop: the stop's result, re-queued. Under Slurm
            # the job's processes get the scancel / time limit's SIGTERM with the worker's, and
            # may die before the worker stops them (docs/slurm.md): not a failure of the job.
            why = attempt.stop_reason or "worker shutting down"
            status = dataclasses.replace(status, state=JobState.CANCELLED, reason=f"{why} ({status.reason})")
        if attempt.cause:
            ending = dataclasses.replace(ending, cause=attempt.cause)
        elif lapsed or status.state is not JobState.FAILED:
            ending = dataclasses.replace(ending, cause="")  # (an OOM counts only as a failure)
        return effects + self._finish(attempt, status.state, status.exit_code, status.reason, ending)

    # -------------------------------------------------------------------------- shutdown

    def shutdown(self, reason: str = "worker shutting down") -> list[Effect]:
        self.shutting_down = True
        return self._stop_all(reason, self.grace_s)

    # --------------------------------------------------------------------------- queries

    def running(self) -> list[AttemptKey]:
        """What to report as running: every attempt not finished (it may still hold its GPUs)."""
        return sorted(
            (a.key for a in self.attempts.values() if a.phase is not Phase.FINISHED),
            key=lambda k: (k.job_id, k.attempt),
        )

    def live(self) -> list[Attempt]:
        """Attempts with processes: RUNNING or STOPPING."""
        return self._in(Phase.RUNNING, Phase.STOPPING)

    def idle(self) -> bool:
        return not self.running()

    def finals(self) -> list[Update]:
        return [a.final for a in self.attempts.values() if a.final is not None]

    def prune(self) -> None:
        """Forget finals older than ``finals_ttl_s``; keep their keys so a late copy never starts."""
        horizon = self.clock.monotonic() - self.finals_ttl_s
        for key in [k for k, a in self.attempts.items() if a.final is not None and a.finished_at < horizon]:
            del self.attempts[key]
            self._tombstones[key] = None
            while len(self._tombstones) > self._max_tombstones:
                self._tombstones.popitem(last=False)

    # --------------------------------------------------------------------------- helpers

    def _in(self, *phases: Phase) -> list[Attempt]:
        return [a for a in self.attempts.values() if a.phase in phases]

    def _stop(self, attempt: Attempt, reason: str, grace_s: float) -> list[Effect]:
        if attempt.phase is Phase.STARTING:
            attempt.stop_reason = attempt.stop_reason or reason
            return []
        if attempt.phase is Phase.RUNNING:
            attempt.phase, attempt.stop_reason = Phase.STOPPING, reason
            return [Stop(attempt.key, reason, grace_s)]
        return []

    def _stop_all(self, reason: str, grace_s: float) -> list[Effect]:
        effects: list[Effect] = []
        for attempt in self._in(Phase.STARTING, Phase.RUNNING):
            effects += self._stop(attempt, reason, grace_s)
        return effects

    def _finish(
        self, attempt: Attempt, state: JobState, code: int | None, reason: str, ending: Ending = NO_ENDING
    ) -> list[Effect]:
        attempt.phase = Phase.FINISHED
        attempt.final = Update(attempt.key, state, code, reason, self.clock.time(), ending)
        attempt.finished_at = self.clock.monotonic()
        return [Send(attempt.final)]
