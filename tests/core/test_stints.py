"""The attempt-stint ledger (horus_core/policies/stints.py) that backfill and LAS keep per pass:
the bulk update agrees with the rule stated one job at a time."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from horus_core.policies.stints import stints
from horus_core.testing import running

R50 = "ResNet-50 (batch size 16)"

# a pass: per job id present, its attempt (ids 0..7, attempts 1..3)
passes = st.lists(st.dictionaries(st.integers(0, 7), st.integers(1, 3)), min_size=1, max_size=6)


@given(passes)
def test_a_stint_starts_when_a_job_or_its_attempt_is_first_seen(seq: list[dict[int, int]]) -> None:
    since: dict[str, float] = {}
    attempts: dict[str, int] = {}
    naive: dict[str, tuple[int, float]] = {}  # id -> (attempt, first seen), the rule one by one
    for t, present in enumerate(seq):
        now = 10.0 * t
        jobs = [replace(running(f"j{i}", R50, (f"g{i}",)), attempt=a) for i, a in sorted(present.items())]
        got = stints(jobs, since, attempts, now)
        naive = {
            j.id: naive[j.id] if j.id in naive and naive[j.id][0] == j.attempt else (j.attempt, now)
            for j in jobs
        }
        assert got.since == {k: v[1] for k, v in naive.items()}
        assert got.attempts == {k: v[0] for k, v in naive.items()}
        assert set(got.changed()) == {j.id for j in jobs if naive[j.id][1] == now}
        assert set(got.kept()) | set(got.changed()) == set(got.ids)
        since, attempts = got.since, got.attempts
