"""The gang part-update transition over a stored row (pure, no server): whatever the parts report,
in any order and repeated, the attempt number never changes, the attempt ends at most once, and
the job succeeds only when every part did."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from horus_core import gang
from horus_core.model import Job, JobSpec, JobState
from master.services import transitions as tr
from master.services.gang_transitions import MAX_GANG_ATTEMPTS, part_update
from master.store.rows import JobRow

NODES = ("a", "b", "c")
_STATES = [JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]
reports = st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(_STATES)), max_size=15)


def _row(attempt: int = 1) -> JobRow:
    job = Job(
        "j", JobSpec(("x",), gpus=3), JobState.ASSIGNED, attempt=attempt, node="a", gpus=("a0", "b0", "c0")
    )
    job = dataclasses.replace(job, nodes=NODES)
    return JobRow(job, parts=gang.stored(gang.start(NODES)))


def _apply(row: JobRow, node: str, state: JobState) -> tuple[JobRow, tr.UpdateVerdict]:
    verdict = tr.UpdateVerdict()
    out = part_update(
        node, row.job.attempt, state, 1 if state is JobState.FAILED else None, "", 0.0, verdict
    )(row)
    return (out if out is not None else row), verdict


@given(reports, st.integers(1, MAX_GANG_ATTEMPTS))
def test_the_attempt_ends_once_and_never_changes_its_number(
    events: list[tuple[str, JobState]], attempt: int
) -> None:
    row, ends, seen = _row(attempt), 0, set[str]()
    for node, state in events:
        was_active = row.job.state.active
        row, verdict = _apply(row, node, state)
        assert row.job.attempt == attempt and verdict.seen
        ends += was_active and not row.job.state.active
        if state is JobState.RUNNING and not row.job.state.active:
            assert verdict.kill  # a part still running after the end is told to stop
        if state is JobState.SUCCEEDED and was_active:
            seen.add(node)
    assert ends <= 1
    if row.job.state is JobState.SUCCEEDED:
        assert seen == set(NODES)


def test_a_failed_part_requeues_until_the_last_attempt_then_fails() -> None:
    row, _ = _apply(_row(1), "b", JobState.FAILED)
    assert (row.job.state, row.job.attempt) == (JobState.PENDING, 1)
    assert row.job.reason == "attempt 1: part 1 on b failed (exit code 1); re-queued"
    last, _ = _apply(_row(MAX_GANG_ATTEMPTS), "b", JobState.FAILED)
    assert last.job.state is JobState.FAILED and "gave up" in last.job.reason


def test_a_cancel_asked_for_ends_as_cancelled() -> None:
    row = dataclasses.replace(_row(), cancel_requested=True)
    out, _ = _apply(row, "c", JobState.CANCELLED)
    assert out.job.state is JobState.CANCELLED
