"""The one index from a source's job numbers to rows (horus_core/packing/numbers.py), which the
job table (slots) and the progress reports (report rows) both use: a number finds the row put
for it only while that row is not freed, and only in its own source."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.packing.numbers import NumberIndex

# a round: the numbers looked up, the rows freed after, and the source (s2 numbers other jobs)
ROUNDS = st.lists(
    st.tuples(st.sets(st.integers(0, 30), max_size=12), st.sets(st.integers(0, 30), max_size=3),
              st.sampled_from(["s1", "s1", "s1", "s2"])),
    max_size=25,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(ROUNDS)
def test_a_number_finds_the_row_put_for_it_until_that_row_is_freed(
    rounds: list[tuple[set[int], set[int], str]],
) -> None:
    """Each round looks numbers up, gives the new ones rows (as a consumer does) and frees the
    rows of some; the oracle is a dict of the current source's numbers."""
    index, known, free, source_now = NumberIndex(), dict[int, int](), list(range(1000)), ""
    for present, leaving, source in rounds:
        if source != source_now:  # another source: its numbers name other jobs
            known, source_now = {}, source
        numbers = np.array(sorted(present), np.int64)
        found = index.find(source, numbers)
        assert found is not None
        got, misses = found
        assert got.tolist() == [known.get(n, -1) for n in numbers.tolist()] and misses == int((got < 0).sum())
        miss = np.flatnonzero(got < 0)
        for k in miss.tolist():
            got[k] = known[int(numbers[k])] = free.pop()
        index.put(numbers[miss], got[miss])
        gone = [known.pop(n) for n in leaving if n in known]
        index.free(gone)
        free += gone


def rows(index: NumberIndex, source: str, numbers: np.ndarray) -> list[int]:
    found = index.find(source, numbers)
    assert found is not None and found[1] == sum(r < 0 for r in found[0].tolist())
    out: list[int] = found[0].tolist()
    return out


def test_a_number_found_once_is_an_array_read_and_a_freed_row_is_not_found() -> None:
    index = NumberIndex()
    numbers = np.array([7, 3, 100], np.int64)
    assert rows(index, "s", numbers) == [-1, -1, -1]
    index.put(numbers, np.array([0, 1, 2], np.intp))
    assert rows(index, "s", numbers) == [0, 1, 2]
    index.free([1])  # the job numbered 3 left; its row goes to the job numbered 4
    index.put(np.array([4], np.int64), np.array([1], np.intp))
    assert rows(index, "s", np.array([3, 4], np.int64)) == [-1, 1]
    assert rows(index, "other", numbers) == [-1, -1, -1]


def test_numbers_far_apart_or_negative_are_not_mapped() -> None:
    index = NumberIndex()
    for numbers in ([1 << 40, 2], [-1, 2]):
        assert index.find("s", np.array(numbers, np.int64)) is None


def test_the_index_moves_up_with_the_live_numbers() -> None:
    index = NumberIndex()
    index.find("s", np.array([0, 1], np.int64))
    index.put(np.array([0, 1], np.int64), np.array([0, 1], np.intp))
    far = np.array([1_000_000, 1_000_001], np.int64)  # (the early jobs left long ago)
    assert rows(index, "s", far) == [-1, -1] and index.base == 1_000_000
    index.put(far, np.array([2, 3], np.intp))
    assert rows(index, "s", far) == [2, 3]
