"""The container CPU limit: 0 (none) or a value the store and Docker keep as given."""

from __future__ import annotations

import pytest

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from horus_core.validation import MIN_CPUS, validate_spec


@pytest.mark.parametrize("cpus", [0.0, MIN_CPUS, 2.5])
def test_no_limit_or_a_usable_limit_is_accepted(cpus: float) -> None:
    validate_spec(JobSpec(command=("true",), cpus=cpus))


@pytest.mark.parametrize("cpus", [1.6e-193, MIN_CPUS / 2, -1.0, float("nan"), float("inf")])
def test_a_vanishing_negative_or_non_finite_limit_is_refused(cpus: float) -> None:
    with pytest.raises(InvalidArgument) as err:
        validate_spec(JobSpec(command=("true",), cpus=cpus))
    assert "cpus" in str(err.value)
