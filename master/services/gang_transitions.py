"""Attempt updates from a multi-node gang's parts, as a transition of the job's row: each part's
state is kept in the row (:attr:`JobRow.parts`) and :func:`horus_core.gang.report` says what
it means for the job. A job on one node goes to :func:`transitions.worker_update` unchanged.
"""

from __future__ import annotations

import dataclasses

from horus_core import gang
from horus_core.containment import Ending
from horus_core.gang import Verdict
from horus_core.model import JobState
from master.services import transitions as tr
from master.store.jobs import Transition
from master.store.rows import JobRow

# A gang whose part fails is re-queued (its other parts were often only cut off by the failure);
# the attempt that reaches this number fails the job instead.
MAX_GANG_ATTEMPTS = 3


def part_update(
    node: str,
    attempt: int,
    state: JobState,
    exit_code: int | None,
    reason: str,
    now: float,
    verdict: tr.UpdateVerdict,
    ending: Ending = tr.NO_ENDING,
) -> Transition:
    """Apply an ``AttemptUpdate`` from ``node``, whether the job runs on one node or several
    (``ending``: a final update's sharing facts; a gang's parts are not contained)."""
    single = tr.worker_update(node, attempt, state, exit_code, reason, now, verdict, ending)

    def fn(row: JobRow) -> JobRow | None:
        job = row.job
        if not gang.is_gang(job) or job.attempt != attempt or node not in job.nodes:
            return single(row)
        verdict.kill, verdict.seen = False, True
        verdict.ended = state is not JobState.RUNNING
        if not job.state.active:  # the attempt is over (re-queued or finished): parts only stop
            verdict.kill = state is JobState.RUNNING
            return None
        return _report(row, node, state, exit_code, reason, now)

    return fn


def _report(
    row: JobRow, node: str, state: JobState, exit_code: int | None, reason: str, now: float
) -> JobRow | None:
    job = row.job
    out = gang.report(job.nodes, gang.parts_of(row.parts, len(job.nodes)), node, state)
    if out.parts == gang.parts_of(row.parts, len(job.nodes)):
        return None
    row = dataclasses.replace(row, parts=gang.stored(out.parts))
    rank = job.nodes.index(node)
    if out.verdict is Verdict.NONE:
        return dataclasses.replace(row, job=dataclasses.replace(job, updated_at=now))
    if out.verdict is Verdict.RUNNING:
        where = f"running on {len(job.nodes)} nodes ({', '.join(job.nodes)})"
        return tr.set_row(row, now, state=JobState.RUNNING, started_at=now, reason=where)
    if out.verdict is Verdict.SUCCEEDED:
        return tr.finish_row(row, JobState.SUCCEEDED, now, "succeeded on every node", 0)
    if row.cancel_requested:
        return tr.finish_row(row, JobState.CANCELLED, now, job.reason.removeprefix("cancelling: "), exit_code)
    why = reason or ("failed" if state is JobState.FAILED else "stopped by the worker")
    if exit_code is not None and state is JobState.FAILED and not reason:
        why = f"failed (exit code {exit_code})"
    text = f"attempt {job.attempt}: part {rank} on {node} {why}"
    if out.verdict is Verdict.FAILED and job.attempt >= MAX_GANG_ATTEMPTS:
        return tr.finish_row(
            row, JobState.FAILED, now, f"{text}; gave up after {job.attempt} attempts", exit_code
        )
    return tr.set_row(row, now, state=JobState.PENDING, reason=f"{text}; re-queued")
