"""The interference model against the packaged Gavel table (real data, no mocks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import horus_core.interference as interference
from horus_core.caps import with_margin
from horus_core.interference import InterferenceModel, JobProfile, default_model
from horus_core.interference.completion import complete
from horus_core.interference.derive import speed_matrix
from horus_core.interference.profiles import GAVEL_PROFILES, RESERVE_MIB, analytic_speed, gpu_memory_of
from horus_core.interference.table import packaged_table
from horus_core.model import JobSpec, ProfileHints

R18_16 = "ResNet-18 (batch size 16)"
R18_32 = "ResNet-18 (batch size 32)"
R50_16 = "ResNet-50 (batch size 16)"
R50_128 = "ResNet-50 (batch size 128)"
T_256 = "Transformer (batch size 256)"
REC_512 = "Recommendation (batch size 512)"
LM_5 = "LM (batch size 5)"
V100_MIB = 16160


@pytest.fixture
def model() -> InterferenceModel:
    return default_model()


def test_public_surface_is_pinned() -> None:
    assert sorted(interference.__all__) == ["InterferenceModel", "JobProfile", "default_model"]
    for name in (
        "signature", "profile", "profile_of", "solo_throughput", "co_speeds", "fits",
        "predicted_slowdown", "observe_profile", "observe_pair", "known_job_types",
    ):  # fmt: skip
        assert callable(getattr(InterferenceModel, name))


def test_packaged_table_has_the_gavel_job_types(model: InterferenceModel) -> None:
    types = model.known_job_types()
    assert len(types) == 26 and R18_16 in types and "CycleGAN" in types
    assert set(types) == set(GAVEL_PROFILES)


def test_solo_throughput_reads_the_null_entry(model: InterferenceModel) -> None:
    assert model.solo_throughput(R18_16, 1, "v100") == pytest.approx(32.353384328946916)
    assert model.solo_throughput(R18_16, 8, "v100") == pytest.approx(382.6, abs=0.1)
    assert model.solo_throughput("A3C", 4, "v100") is None  # only measured on 1 GPU
    assert model.solo_throughput(R18_16, 1, "h100") is None


def test_pair_speed_is_pair_value_over_solo(model: InterferenceModel) -> None:
    raw = 24.45464779058787 / 32.353384328946916  # ResNet-18 bs16 next to bs256, from the JSON
    s16, s256 = model.co_speeds([R18_16, "ResNet-18 (batch size 256)"], "v100")
    assert s16 == pytest.approx(raw)
    assert s256 == pytest.approx(10.300256501360458 / 10.30025650136)


def test_co_speeds_follow_the_argument_order(model: InterferenceModel) -> None:
    a, b = model.co_speeds([R50_16, REC_512], "v100")
    assert model.co_speeds([REC_512, R50_16], "v100") == (b, a)
    assert a < 0.35 and b < 0.15  # a famously bad pair


def test_out_of_memory_pair_does_not_fit_on_16_gb(model: InterferenceModel) -> None:
    assert model.co_speeds([R50_128, T_256], "v100") == (0.0, 0.0)
    assert not model.fits([R50_128, T_256], V100_MIB)
    assert model.fits([R50_128, T_256], 81559)  # the table's OOM says nothing about 80 GB
    h100 = model.co_speeds([R50_128, T_256], "h100")
    assert all(0.0 < s <= 1.0 for s in h100)


def test_every_job_type_fits_alone_wherever_the_table_ran_it(model: InterferenceModel) -> None:
    for gpu in ("k80", "p100", "v100"):
        for job_type in model.known_job_types():
            if model.solo_throughput(job_type, 1, gpu) is not None:
                assert model.co_speeds([job_type], gpu) == (1.0,), (gpu, job_type)


def test_fits_is_hard_memory_with_headroom(model: InterferenceModel) -> None:
    mem = GAVEL_PROFILES[R50_128][2]
    assert model.fits([R50_128], mem + RESERVE_MIB + 1)
    assert not model.fits([R50_128], mem + RESERVE_MIB)
    assert not model.fits([R18_16] * 4, 10**6)  # at most 3 per GPU


def test_triple_speed_is_the_product_of_pair_speeds(model: InterferenceModel) -> None:
    trio = [R18_16, LM_5, "A3C"]
    speeds = model.co_speeds(trio, "v100")
    for i, me in enumerate(trio):
        expected = math.prod(model.co_speeds([me, other], "v100")[0] for other in trio if other is not me)
        assert speeds[i] == pytest.approx(expected)
    assert model.predicted_slowdown(trio, "v100") == min(speeds)
    assert model.predicted_slowdown([], "v100") == 1.0


def test_unmeasured_gpu_types_use_v100_pairs(model: InterferenceModel) -> None:
    assert model.co_speeds([R50_16, REC_512], "a100") == model.co_speeds([R50_16, REC_512], "v100")
    assert model.co_speeds([R50_16, REC_512], "k80") != model.co_speeds([R50_16, REC_512], "v100")


def test_profile_sources_in_order_of_trust(model: InterferenceModel) -> None:
    hinted = ProfileHints(util_avg=10.0, util_peak=20.0, mem_mib=1000)
    table = model.profile(JobSpec(("x",), job_type=R18_16, hints=hinted))
    assert table.source == "table" and table.mem_mib == GAVEL_PROFILES[R18_16][2]
    bert = JobSpec(("x",), job_type="my-bert", hints=hinted)
    hints = model.profile(bert)
    assert hints == JobProfile(10.0, 20.0, 1000, "hints")
    assert model.profile_of("my-bert").source == "default"  # reading a profile changes nothing
    version = model.version
    model.enter(bert)  # a job enters: its hints are registered
    assert model.profile_of("my-bert") == hints and model.version > version
    assert model.profile(JobSpec(("x",))).source == "default"
    model.observe_profile(R18_16, 50.0, 70.0, 3000)  # a measured peak: the cap carries the margin
    assert model.profile_of(R18_16) == JobProfile(50.0, 70.0, with_margin(3000), "measured")


def test_observed_profile_follows_an_ewma_and_memory_rises_at_once(model: InterferenceModel) -> None:
    model.observe_profile("sig", 40.0, 60.0, 1000)
    model.observe_profile("sig", 80.0, 90.0, 4000)
    p = model.profile_of("sig")
    assert 40.0 < p.util_avg < 80.0 and p.util_peak >= p.util_avg
    assert p.mem_mib == with_margin(4000)
    model.observe_profile("sig", 80.0, 90.0, 1000)
    assert with_margin(1000) < model.profile_of("sig").mem_mib < with_margin(4000)


def test_hint_signatures_are_stable_and_round_trip(model: InterferenceModel) -> None:
    spec = JobSpec(("x",), hints=ProfileHints(util_avg=33.0, mem_mib=3000))
    sig = model.signature(spec)
    assert sig == model.signature(JobSpec(("y",), hints=ProfileHints(util_avg=34.0, mem_mib=2900)))
    prof = model.profile_of(sig)
    assert prof.source == "hints" and prof.util_avg == 35.0 and prof.mem_mib == 3072
    assert prof.util_peak >= prof.util_avg
    assert model.signature(JobSpec(("x",), job_type=R18_16)) == R18_16


def test_observed_pair_wins_over_the_table(model: InterferenceModel) -> None:
    before = model.co_speeds([R18_16, LM_5], "v100")
    model.observe_pair(R18_16, LM_5, "v100", 0.5, 0.6)
    assert model.co_speeds([R18_16, LM_5], "v100") == (0.5, 0.6)
    assert model.co_speeds([LM_5, R18_16], "v100") == (0.6, 0.5)
    assert default_model().co_speeds([R18_16, LM_5], "v100") == before  # fresh model, no leak


def test_completion_predicts_held_out_pairs_better_than_the_analytic_model() -> None:
    speeds = speed_matrix(packaged_table(), "v100")
    feasible = speeds > 0
    hold = (np.random.default_rng(7).random(speeds.shape) < 0.2) & feasible
    predicted = complete(speeds, feasible & ~hold)
    types = packaged_table().job_types
    analytic = np.array(
        [[analytic_speed(GAVEL_PROFILES[a][1], GAVEL_PROFILES[b][0]) for b in types] for a in types]
    )
    err_completion = np.sqrt(np.mean((predicted[hold] - speeds[hold]) ** 2))
    err_analytic = np.sqrt(np.mean((analytic[hold] - speeds[hold]) ** 2))
    assert err_completion < err_analytic < 0.2


@pytest.mark.parametrize("twin", [R50_16, LM_5, "Transformer (batch size 64)"])
def test_a_new_job_type_learns_from_a_few_measured_partners(twin: str) -> None:
    """'new' behaves like ``twin``: after 9 measured pairs the completion predicts the others
    far better than the analytic model does from a profile alone."""
    learned, analytic = default_model(), default_model()
    types = learned.known_job_types()
    for m in (learned, analytic):
        m.observe_profile("new", 50.0, 70.0, 2000)
    for other in types[::3]:
        mine, theirs = learned.co_speeds([twin, other], "v100")
        learned.observe_pair("new", other, "v100", mine, theirs)
    rest = [o for o in types[1::3] if learned.co_speeds([twin, o], "v100")[0] > 0]
    truth = np.array([learned.co_speeds([twin, o], "v100")[0] for o in rest])
    err_learned = np.abs(truth - [learned.co_speeds(["new", o], "v100")[0] for o in rest]).mean()
    err_analytic = np.abs(truth - [analytic.co_speeds(["new", o], "v100")[0] for o in rest]).mean()
    assert err_learned < 0.1
    assert err_learned < err_analytic


def test_analytic_model_is_flat_below_one_gpu_and_steep_above() -> None:
    assert analytic_speed(40.0, 0.0) == 1.0
    assert analytic_speed(40.0, 50.0) > 0.9
    assert analytic_speed(90.0, 90.0) < 0.4
    assert analytic_speed(90.0, 90.0) < analytic_speed(60.0, 90.0)


def test_memory_profiles_reproduce_the_tables_out_of_memory_pairs() -> None:
    """Derived footprints say 'does not fit' exactly where the 16 GB tables saw OOM (2 misses)."""
    table = packaged_table()
    wrong = 0
    for gpu, cap in (("v100", 16160), ("p100", 16280)):
        for i, a in enumerate(table.job_types):
            for b in table.job_types[i:]:
                fits_by_memory = GAVEL_PROFILES[a][2] + GAVEL_PROFILES[b][2] < cap - RESERVE_MIB
                wrong += fits_by_memory != (table.pairs[(gpu, a, b)][0] > 0)
    assert wrong == 2


def test_profiles_are_what_the_derivation_produces() -> None:
    pytest.importorskip("scipy")
    from horus_core.interference.derive import derive

    derived = derive()
    for job_type, (avg, peak, mem) in GAVEL_PROFILES.items():
        d_avg, d_peak, d_mem = derived[job_type]
        assert (d_avg, d_peak) == pytest.approx((avg, peak), abs=0.15)
        assert abs(d_mem - mem) <= 2


names = st.sampled_from(packaged_table().job_types)


@settings(max_examples=60, deadline=None)
@given(st.lists(names, min_size=1, max_size=3), st.sampled_from(["v100", "p100", "k80", "h100"]))
def test_co_speeds_are_normalised_and_permutation_invariant(sigs: list[str], gpu: str) -> None:
    model = default_model()
    speeds = model.co_speeds(sigs, gpu)
    assert len(speeds) == len(sigs) and all(0.0 <= s <= 1.0 for s in speeds)
    assert model.co_speeds(sigs[::-1], gpu) == speeds[::-1]
    if len(sigs) == 1:
        assert speeds == (1.0,)
    assert (min(speeds) > 0.0) == model.fits(sigs, gpu_memory_of(gpu))
