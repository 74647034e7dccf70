"""Pure job-state transitions: each looks at the stored row and returns the new row or None.

They run inside the writer's transaction (see :class:`master.store.jobs.TransitionOp`), so every
decision is re-checked against the committed state, however stale the caller's view was.
"""

from __future__ import annotations

from dataclasses import dataclass

from horus_core import gang
from horus_core import reasoncodes as rc
from horus_core.caps import alone
from horus_core.containment import Contained, Ending, contain
from horus_core.evolve import evolve
from horus_core.model import JobState
from master.store.jobs import Transition
from master.store.rows import JobRow

FINAL_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
NO_ENDING = Ending()


def _set(row: JobRow, now: float, **changes: object) -> JobRow:
    job = evolve(row.job, updated_at=now, **changes)
    return evolve(row, job=job)


def _finish(row: JobRow, state: JobState, now: float, reason: str, exit_code: int | None = None) -> JobRow:
    out = _set(row, now, state=state, finished_at=now, reason=reason, exit_code=exit_code, reason_code="")
    return evolve(out, cancel_requested=False)


def assign(
    node: str,
    gpus: tuple[str, ...],
    predicted_slowdown: float,
    now: float,
    nodes: tuple[str, ...] = (),
    cap_mib: int = 0,
) -> Transition:
    """``nodes``: a multi-node gang's nodes in rank order (``nodes[0] == node``); () on one node.
    ``cap_mib``: the attempt's GPU memory cap per GPU (0: none; docs/sharing.md)."""
    gang_nodes = nodes if len(nodes) > 1 else ()

    def fn(row: JobRow) -> JobRow | None:
        if row.job.state is not JobState.PENDING or row.cancel_requested:
            return None
        job = evolve(
            row.job,
            updated_at=now,
            state=JobState.ASSIGNED,
            attempt=row.job.attempt + 1,
            node=node,
            gpus=gpus,
            predicted_slowdown=predicted_slowdown,
            reason=f"assigned to {node}",
            reason_code="",
            started_at=None,
            finished_at=None,
            exit_code=None,
            nodes=gang_nodes,
            gpu_memory_cap_mib=cap_mib,
        )
        return evolve(row, job=job, parts=gang.stored(gang.start(gang_nodes)))

    return fn


def requeue(reason: str, now: float, *, node: str | None = None, attempt: int | None = None) -> Transition:
    """An active attempt ends without a result: back to PENDING (CANCELLED if a cancel was asked).

    ``reason`` may use ``{attempt}`` and ``{node}``. With ``node``/``attempt`` given, only that
    node's / that attempt's job is touched.
    """

    def fn(row: JobRow) -> JobRow | None:
        job = row.job
        if not job.state.active or (node is not None and not gang.part_active(job, row.parts, node)):
            return None  # (a gang's part on ``node`` that already ended does not stop the others)
        if attempt is not None and job.attempt != attempt:
            return None
        text = reason.format(attempt=job.attempt, node=node or job.node)
        if row.cancel_requested:
            return _finish(row, JobState.CANCELLED, now, f"cancelled ({text})")
        return _set(row, now, state=JobState.PENDING, reason=text, reason_code=rc.PREEMPTED)

    return fn


def preempt(reason: str, now: float) -> Transition:
    def fn(row: JobRow) -> JobRow | None:
        if not row.job.state.active or row.cancel_requested:
            return None
        return _set(row, now, state=JobState.PENDING, reason=f"preempted: {reason}", reason_code=rc.PREEMPTED)

    return fn


# A job re-queued to run alone after going over its GPU memory keeps that code and sentence
# while it merely waits for room (docs/sharing.md): why it waits is what happened to it.
_KEPT_WHILE_WAITING = frozenset({rc.RESOURCES, rc.PRIORITY, rc.INTERFERENCE})


def set_wait_reason(reason: str, now: float, code: str = "") -> Transition:
    def fn(row: JobRow) -> JobRow | None:
        job = row.job
        if job.state is not JobState.PENDING or (job.reason == reason and job.reason_code == code):
            return None
        if job.reason_code == rc.GPU_MEMORY_EXCEEDED and (code or rc.RESOURCES) in _KEPT_WHILE_WAITING:
            return None
        job = evolve(job, reason=reason, reason_code=code or rc.RESOURCES)
        return evolve(row, job=job)

    return fn


def cancel(reason: str, now: float, *, node_lost: bool) -> Transition:
    """PENDING: CANCELLED now. Active: mark the cancel (a Kill follows) unless the node is lost."""

    def fn(row: JobRow) -> JobRow | None:
        job = row.job
        if job.state is JobState.PENDING or (job.state.active and node_lost):
            return _finish(row, JobState.CANCELLED, now, reason)
        if job.state.active and not row.cancel_requested:
            return evolve(_set(row, now, reason=f"cancelling: {reason}"), cancel_requested=True)
        return None

    return fn


def cancel_unstarted(now: float) -> Transition:
    """An ASSIGNED attempt the worker never started, whose job was meanwhile cancelled."""

    def fn(row: JobRow) -> JobRow | None:
        if row.job.state is JobState.ASSIGNED and row.cancel_requested:
            return _finish(row, JobState.CANCELLED, now, row.job.reason.removeprefix("cancelling: "))
        return None

    return fn


@dataclass
class UpdateVerdict:
    """Filled in by :func:`worker_update`: whether the reporting worker must kill the attempt."""

    kill: bool = False
    ended: bool = False  # the attempt is over as far as the master is concerned
    seen: bool = False  # the job exists


def worker_update(
    node: str,
    attempt: int,
    state: JobState,
    exit_code: int | None,
    reason: str,
    now: float,
    verdict: UpdateVerdict,
    ending: Ending = NO_ENDING,
) -> Transition:
    """Apply an ``AttemptUpdate`` from ``node`` (docs/protocol.md: idempotent on (job, attempt)).
    ``ending``: the sharing facts of a final update; an attempt that ended for its GPU memory is
    contained (:func:`horus_core.containment.contain`, docs/sharing.md)."""

    def fn(row: JobRow) -> JobRow | None:
        job = row.job
        verdict.kill, verdict.seen = False, True
        if job.attempt != attempt or job.node != node or job.state.terminal:
            verdict.kill = state is JobState.RUNNING  # stale or unknown attempt still running: fence it
            return None
        if job.state is JobState.PENDING:  # re-queued, not yet re-assigned: a real result still counts
            if state in (JobState.SUCCEEDED, JobState.FAILED):
                verdict.ended = True
                return _finish(row, state, now, reason or _exit_reason(state, exit_code), exit_code)
            verdict.kill = state is JobState.RUNNING
            return None
        if state is JobState.RUNNING:
            if job.state is JobState.ASSIGNED:
                return _set(row, now, state=JobState.RUNNING, started_at=now, reason=f"running on {node}")
            return None
        verdict.ended = True
        if ending.peak_mib > 0:
            row = evolve(row, job=evolve(job, gpu_memory_peak_mib=ending.peak_mib))
        contained = None if row.cancel_requested else contain(row.job, ending)
        if contained is not None:
            return _contained(row, contained, now)
        if state is JobState.CANCELLED and not row.cancel_requested:
            why = reason or "stopped by the worker"
            return _set(
                row, now, state=JobState.PENDING, reason=f"attempt {attempt} {why}", reason_code=rc.PREEMPTED
            )
        if state is JobState.CANCELLED:
            return _finish(row, state, now, job.reason.removeprefix("cancelling: "), exit_code)
        return _finish(row, state, now, reason or _exit_reason(state, exit_code), exit_code)

    return fn


def _contained(row: JobRow, c: Contained, now: float) -> JobRow:
    """Back to PENDING, not failed; the grower alone from now on, with its raised cap."""
    out = _set(row, now, state=JobState.PENDING, reason=c.reason, reason_code=c.code)
    if c.alone_mib > 0:
        job = out.job
        out = evolve(out, job=evolve(job, spec=alone(job.spec, c.alone_mib), contained_mib=c.alone_mib))
    return out


def _exit_reason(state: JobState, exit_code: int | None) -> str:
    if state is JobState.SUCCEEDED:
        return "succeeded"
    return f"failed (exit code {exit_code})" if exit_code is not None else "failed"


# The steps the gang transitions (master/services/gang_transitions.py) build on.
set_row = _set
finish_row = _finish
