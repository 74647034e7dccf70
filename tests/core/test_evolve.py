"""``horus_core.evolve.evolve`` is ``dataclasses.replace`` for the slotted dataclasses a pass
copies (Job, JobRow): the same copy for any change, and a clear refusal where it cannot be."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horus_core.evolve import evolve
from horus_core.model import JobState
from horus_core.testing import pending, running
from master.store.rows import JobRow

R50 = "ResNet-50 (batch size 16)"
JOB_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "state": st.sampled_from(list(JobState)),
        "attempt": st.integers(0, 9),
        "node": st.text(max_size=5),
        "gpus": st.tuples(st.text(max_size=4)),
        "started_at": st.none() | st.floats(allow_nan=False),
        "reason": st.text(max_size=20),
        "exit_code": st.none() | st.integers(-9, 255),
        "version": st.integers(0, 10**6),
        "nodes": st.tuples(st.text(max_size=3), st.text(max_size=3)),
    },
)


@given(changes=JOB_CHANGES, cancel=st.booleans(), seq=st.integers(0, 99))
def test_a_copy_is_what_dataclasses_replace_makes(changes: dict[str, object], cancel: bool, seq: int) -> None:
    for job in (pending("a", R50, gpus=2), running("b", R50, ("n0g0",))):
        copy = evolve(job, **changes)
        assert copy == dataclasses.replace(job, **changes)  # type: ignore[arg-type]
        assert type(copy) is type(job) and copy is not job
        row = JobRow(job)
        changed = evolve(row, job=copy, cancel_requested=cancel, seq=seq)
        assert changed == dataclasses.replace(row, job=copy, cancel_requested=cancel, seq=seq)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.node = "x"  # type: ignore[misc]  # (still frozen)


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        evolve(pending("a", R50), colour="red")


@dataclass(frozen=True, slots=True)
class _Checked:
    x: int

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x < 0")


@dataclass(frozen=True)
class _Plain:
    x: int


@dataclass(frozen=True, slots=True)
class _Derived:
    x: int
    y: int = field(init=False, default=0)


@pytest.mark.parametrize("obj", [_Checked(1), _Plain(1), _Derived(1), (1, 2)])
def test_a_class_it_cannot_copy_exactly_is_refused(obj: object) -> None:
    with pytest.raises(TypeError, match="evolve"):
        evolve(obj, x=2)
