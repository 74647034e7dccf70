"""Prediction of unmeasured pairs: the completion on synthetic matrices, and per GPU type."""

from __future__ import annotations

import numpy as np
import pytest

from horus_core.interference import InterferenceModel
from horus_core.interference.completion import CANDIDATES, Fit, choose, complete
from horus_core.interference.learned import CompletedPairs
from horus_core.interference.table import ThroughputTable, packaged_table

Matrix = np.ndarray


def low_rank_plus_bias(n: int, seed: int, noise: float = 0.0) -> Matrix:
    """0.7 + sensitivity_i + intensity_j + a rank-2 interaction (+ noise), inside (0.05, 1)."""
    rng = np.random.default_rng(seed)
    rows, cols = rng.uniform(-0.15, 0.15, n), rng.uniform(-0.15, 0.15, n)
    left, right = rng.normal(0.0, 0.25, (n, 2)), rng.normal(0.0, 0.25, (n, 2))
    values = 0.7 + rows[:, None] + cols[None, :] + left @ right.T + rng.normal(0.0, noise, (n, n))
    out: Matrix = np.clip(values, 0.06, 0.99)
    return out


def hidden_mask(n: int, fraction: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 100).random((n, n)) < fraction


def mae(a: Matrix, b: Matrix) -> float:
    return float(np.abs(a - b).mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_a_low_rank_plus_bias_matrix_from_half_its_entries(seed: int) -> None:
    values = low_rank_plus_bias(30, seed)
    hidden = hidden_mask(30, 0.5, seed)
    predicted = complete(values, ~hidden)
    mean_error = mae(np.full(hidden.sum(), values[~hidden].mean()), values[hidden])
    assert mae(predicted[hidden], values[hidden]) < 0.02
    assert mae(predicted[hidden], values[hidden]) < 0.15 * mean_error


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("noise", [0.02, 0.3])
def test_with_90_percent_hidden_it_is_no_worse_than_the_known_mean(seed: int, noise: float) -> None:
    """With structure it is better; with mostly noise (0.3) shrinkage keeps it near the mean."""
    values = low_rank_plus_bias(26, seed, noise)
    hidden = hidden_mask(26, 0.9, seed)
    predicted = complete(values, ~hidden)
    model_error = mae(predicted[hidden], values[hidden])
    mean_error = mae(np.full(hidden.sum(), values[~hidden].mean()), values[hidden])
    assert model_error <= 1.03 * mean_error
    if noise < 0.1:
        assert model_error < 0.9 * mean_error


def test_the_data_decides_how_rich_the_model_is() -> None:
    values = low_rank_plus_bias(30, 4)
    dense = choose(values, ~hidden_mask(30, 0.2, 4))
    sparse_known = np.zeros((30, 30), dtype=bool)
    sparse_known[np.arange(6), np.arange(6) + 1] = True  # 6 entries: too few to cross-validate
    assert dense.rank >= 2
    assert choose(values, sparse_known).rank == 0
    assert choose(values, sparse_known) in CANDIDATES


def test_bad_input_is_refused() -> None:
    values = low_rank_plus_bias(5, 0)
    with pytest.raises(ValueError, match="2-D shape"):
        complete(values, np.ones((5, 4), dtype=bool))
    values[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        complete(values, np.ones((5, 5), dtype=bool))
    assert np.array_equal(complete(values, np.zeros((5, 5), dtype=bool)), np.ones((5, 5)))


JOBS = tuple(f"job{i}" for i in range(8))  # not Gavel job types: no table-derived profiles


def two_type_table(v100_speed: float, hidden: tuple[str, str]) -> ThroughputTable:
    """k80: structured speeds around 0.85 with ``hidden`` missing and job7 measured with one
    partner only; v100: every pair measured, all at ``v100_speed``."""
    k80 = low_rank_plus_bias(len(JOBS), 9) * 0.2 + 0.78
    pairs: dict[tuple[str, str, str], tuple[float, float]] = {}
    for i, a in enumerate(JOBS):
        for j, b in enumerate(JOBS):
            pairs[("v100", a, b)] = (v100_speed, v100_speed)
            lonely = "job7" in (a, b) and {a, b} != {"job7", "job0"}
            if {a, b} != set(hidden) and not lonely:
                pairs[("k80", a, b)] = (float(k80[i, j]), float(k80[j, i]))
    return ThroughputTable({}, pairs, JOBS, ("k80", "v100"))


@pytest.mark.parametrize("pair", [("job1", "job2"), ("job7", "job3")])
def test_a_k80_pair_is_predicted_from_k80_data_only(pair: tuple[str, str]) -> None:
    """Predictions for an unmeasured K80 pair sit among the K80 speeds (0.78-0.98), not near
    the V100 ones or the analytic curve of an unknown job (about 0.26), and do not move when
    every V100 measurement changes; job7 has a single measured K80 partner."""
    low = InterferenceModel(two_type_table(0.2, ("job1", "job2")))
    high = InterferenceModel(two_type_table(0.95, ("job1", "job2")))
    speeds = low.pair_speeds(*pair, "k80")
    assert min(speeds) > 0.75
    assert speeds == high.pair_speeds(*pair, "k80")
    assert low.pair_speeds(*pair, "v100") == (0.2, 0.2)  # measured there: the table's value


def test_a_signature_without_pair_data_on_the_type_keeps_the_analytic_fallback() -> None:
    model = InterferenceModel(two_type_table(0.2, ("job1", "job2")))
    model.observe_profile("newcomer", 30.0, 40.0, 1000)
    alone = InterferenceModel(two_type_table(0.2, ("job1", "job2")))
    alone.observe_profile("newcomer", 30.0, 40.0, 1000)
    model.observe_pair("newcomer", "job1", "k80", 0.5, 0.5)
    # one K80 measurement gives it a row there: K80 now predicts from data, V100 still analytic
    assert model.pair_speeds("newcomer", "job2", "k80") != alone.pair_speeds("newcomer", "job2", "k80")
    assert model.pair_speeds("newcomer", "job2", "v100") == alone.pair_speeds("newcomer", "job2", "v100")


def test_hidden_gavel_pairs_are_predicted_without_the_table_derived_profiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Gavel profiles were fitted on the full V100 table: a hidden pair's prediction must not
    read them (it would leak the hidden speeds). Dropping them changes no prediction."""
    table = packaged_table()
    types = table.job_types
    kept = {frozenset((a, b)) for i, a in enumerate(types) for j, b in enumerate(types) if (i + j) % 10 == 0}
    visible = {k: v for k, v in table.pairs.items() if k[0] == "v100" and frozenset(k[1:]) in kept}
    sparse = ThroughputTable(table.solo, visible, types, ("v100",))  # 2 or 3 partners per job
    hidden = [(a, b) for a in types[::5] for b in types[1::5] if frozenset((a, b)) not in kept]
    with_profiles = [InterferenceModel(sparse).pair_speeds(*p, "v100") for p in hidden]
    monkeypatch.setattr("horus_core.interference.model.GAVEL_PROFILES", {})
    assert [InterferenceModel(sparse).pair_speeds(*p, "v100") for p in hidden] == with_profiles


def test_a_completion_keeps_the_previous_model_choice_until_the_data_grows() -> None:
    """Re-choosing costs ~30 fits: a completion rebuilt after one more observation reuses the
    model chosen before (here forced to the plain mean, which cross-validation would never pick
    on this structured table) until the known entries change by more than 10 %."""
    table = two_type_table(0.2, ("job1", "job2"))
    known = sum(1 for (g, _a, _b) in table.pairs if g == "k80")
    plain_mean = Fit(0, 0.0, 1e6)
    mean = float(np.mean([v[0] for (g, _a, _b), v in table.pairs.items() if g == "k80"]))
    kept = CompletedPairs(table, "k80", {}, previous=(known - 2, plain_mean))
    speeds = kept.predict("job1", "job2")
    assert speeds is not None and speeds == pytest.approx((mean, mean), abs=1e-3)
    assert kept.choice == (known - 2, plain_mean)
    fresh = CompletedPairs(table, "k80", {}, previous=(known // 2, plain_mean))
    again = fresh.predict("job1", "job2")
    assert again is not None and again != pytest.approx((mean, mean), abs=1e-3)
    assert fresh.choice is not None and fresh.choice[0] == known and fresh.choice[1] != plain_mean
