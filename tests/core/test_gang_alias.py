"""The rank-0 container's name on a named gang network (horus_core.gang.rendezvous_alias)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horus_core.gang import rendezvous_alias

LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")  # RFC 1035 label: what Docker's DNS resolves
job_ids = st.text(min_size=1, max_size=64)
attempts = st.integers(min_value=0, max_value=2**63 - 1)


def test_a_plain_job_id_reads_as_job_attempt_rank() -> None:
    assert rendezvous_alias("0123456789ab", 3) == "horus-0123456789ab-a3-r0"


@given(job_ids, attempts)
def test_every_alias_is_a_valid_dns_label_and_the_same_every_time(job_id: str, attempt: int) -> None:
    alias = rendezvous_alias(job_id, attempt)
    assert LABEL.match(alias), alias
    assert "--" not in alias
    assert alias == rendezvous_alias(job_id, attempt)


@given(job_ids, attempts)
def test_the_attempt_changes_the_alias(job_id: str, attempt: int) -> None:
    assert rendezvous_alias(job_id, attempt) != rendezvous_alias(job_id, attempt + 1)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("AB", "ab"),  # case
        ("a_b", "a-b"),  # characters a label may not hold
        ("a--b", "a-b"),
        ("x" * 64, "x" * 63),  # cut to fit
        ("x" * 60 + "1", "x" * 60 + "2"),
    ],
)
def test_job_ids_that_had_to_change_to_fit_still_get_distinct_aliases(a: str, b: str) -> None:
    assert rendezvous_alias(a, 1) != rendezvous_alias(b, 1)
    assert len(rendezvous_alias(a, 1)) <= 63


def test_a_negative_attempt_is_refused() -> None:
    with pytest.raises(ValueError, match="attempt"):
        rendezvous_alias("j", -1)
