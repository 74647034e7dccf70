"""Report rows found by job numbers (horus_core/policies/numbering.py): a number finds its job's
row only while that row is the job's; anything else is looked up by id, as without numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.policies.numbering import Numbering
from horus_core.policies.reported import Reported


class Rows:
    """Rows by id, as RemainingWork keeps them: the oracle, and the ``track`` callback."""

    def __init__(self) -> None:
        self.reports = Reported()
        self.of: dict[str, int] = {}
        self.asked: list[str] = []

    def track(self, job_id: str) -> Rows.Row:
        self.asked.append(job_id)
        if job_id not in self.of:
            self.of[job_id] = self.reports.take()
        return Rows.Row(self.of[job_id])

    def drop(self, job_id: str, numbering: Numbering) -> None:
        row = self.of.pop(job_id)
        numbering.free([row])
        self.reports.free([row])

    class Row:
        def __init__(self, row: int) -> None:
            self.row = row


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 30), max_size=12), st.sets(st.integers(0, 30), max_size=3),
                          st.sampled_from(["s1", "s1", "s1", "s2"])), max_size=25))  # fmt: skip
def test_rows_by_number_are_the_rows_by_id(rounds: list[tuple[set[int], set[int], str]]) -> None:
    """Jobs report, leave (their rows given to others), and the source changes now and then
    (numbers there name other jobs: ``s2`` numbers job k as 30 - k)."""
    rows, numbering = Rows(), Numbering()
    for present, leaving, source in rounds:
        ids = [f"j{k}" for k in sorted(present)]
        numbers = np.array([30 - k if source == "s2" else k for k in sorted(present)], np.int64)
        got = numbering.rows((source, numbers), ids, rows.track)
        assert got.tolist() == [rows.of[i] for i in ids]
        for k in leaving:
            if f"j{k}" in rows.of:
                rows.drop(f"j{k}", numbering)


def test_a_number_found_once_is_not_looked_up_by_id_again() -> None:
    rows, numbering = Rows(), Numbering()
    ids, numbers = ["a", "b", "c"], np.array([7, 3, 100], np.int64)
    first = numbering.rows(("s", numbers), ids, rows.track)
    assert rows.asked == ids
    assert numbering.rows(("s", numbers), ids, rows.track).tolist() == first.tolist()
    assert rows.asked == ids  # (array reads only)
    rows.drop("b", numbering)  # b's row is given to d, numbered 4
    numbering.rows(("s", np.array([4], np.int64)), ["d"], rows.track)
    assert rows.of["d"] == first[1]
    got = numbering.rows(("s", np.array([3], np.int64)), ["b"], rows.track)  # b again: a new row
    assert got[0] == rows.of["b"] != rows.of["d"]


def test_numbers_far_apart_or_negative_are_looked_up_by_id() -> None:
    rows, numbering = Rows(), Numbering()
    for numbers in ([1 << 40, 2], [-1, 2]):
        got = numbering.rows(("s", np.array(numbers, np.int64)), ["x", "y"], rows.track)
        assert got.tolist() == [rows.of["x"], rows.of["y"]]
    assert rows.asked == ["x", "y", "x", "y"]


def test_numbers_and_ids_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="2 reports with 1 numbers"):
        Numbering().rows(("s", np.array([1], np.int64)), ["x", "y"], Rows().track)
