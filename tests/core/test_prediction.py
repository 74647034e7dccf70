"""The card predictor and its place in the interference model's order of trust (real table, real
reference cards, no mocks)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from horus_core.caps import with_margin
from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.analytic import fit_constants
from horus_core.interference.gpus import GPUS, REFERENCE_GPU
from horus_core.interference.predictor import (
    packaged_predictor,
    predictor_from_dict,
    predictor_text,
)
from horus_core.interference.profiles import ALPHA, GAMMA, GAVEL_PROFILES, RESERVE_MIB, analytic_speed
from horus_core.interference.table import packaged_table
from horus_core.interference.train import PACKAGED, _fold, build, fit_predictor, table_labels
from horus_core.model import JobSpec, ProfileHints
from horus_core.modelcard import card_signature, packaged_cards

CARDS = packaged_cards()
VIT = CARDS["ViT-B/16 (batch size 32)"]
R18 = CARDS["ResNet-18 (batch size 32)"]


def test_the_shipped_predictor_is_what_the_training_module_builds() -> None:
    assert PACKAGED.read_text() == predictor_text(build())
    assert predictor_from_dict(json.loads(PACKAGED.read_text())) == packaged_predictor()


def test_predictions_follow_the_work_and_the_gpu() -> None:
    p = packaged_predictor()
    r18 = [CARDS[f"ResNet-18 (batch size {b})"] for b in (16, 32, 64, 128, 256)]
    utils = [p.predict(c).util_avg for c in r18]
    assert utils == sorted(utils) and utils[0] < utils[-1]  # more work per step: busier
    for card in CARDS.values():
        pred = p.predict(card)
        assert 0.0 < pred.util_avg <= pred.util_peak <= 100.0
        assert pred.mem_mib * (1 << 20) >= card.static_bytes + card.activation_bytes  # holds its tensors
    assert p.predict(VIT, "no-such-gpu") == p.predict(VIT, REFERENCE_GPU)
    assert p.predict(VIT, "h200").util_avg < p.predict(VIT, "k80").util_avg  # less time per step


def test_a_held_out_family_is_predicted_better_than_an_unknown_job() -> None:
    """Leave-one-family-out for the LM family: trained on the six others (their labels fitted
    again without the LM pairs), its pair speeds beat today's default profile and the mean."""
    table = packaged_table()
    names = list(table.job_types)
    held = np.array([n.startswith("LM ") for n in names])
    train = table_labels([i for i in range(len(names)) if not held[i]], refit=True)
    predictor = fit_predictor(train)
    full = table_labels()
    from horus_core.interference.derive import speed_matrix

    preds = [predictor.predict(full.cards[i]) for i in np.flatnonzero(held)]
    fold = _fold("LM", held, train, preds, full, speed_matrix(table, REFERENCE_GPU))
    assert fold["pair_mae_card_biases"] < fold["pair_mae_mean"] < fold["pair_mae_default"]  # type: ignore[operator]
    assert fold["util_rmsle"] < fold["util_rmsle_mean"]  # type: ignore[operator]


def _card_spec(card: object, **kw: object) -> JobSpec:
    return JobSpec(command=("t",), model_card=card, **kw)  # type: ignore[arg-type]


def test_order_of_trust_measured_table_card_hints_default() -> None:
    model = default_model()
    spec = _card_spec(VIT)
    sig = model.signature(spec)
    assert sig == card_signature(VIT)
    assert model.profile_of(sig).source == "default"
    prof = model.profile(spec)  # the card's prediction, changing nothing
    assert prof.source == "card" and model.profile_of(sig).source == "default"
    model.enter(spec)  # registers the card
    assert model.profile_of(sig) == prof
    predicted = packaged_predictor().predict(VIT)
    assert (prof.util_avg, prof.mem_mib) == (predicted.util_avg, predicted.mem_mib)
    # a table job type keeps its table profile whatever card it carries
    table_sig = "ResNet-50 (batch size 64)"
    model.add_card(table_sig, VIT)
    assert model.profile_of(table_sig).util_avg == GAVEL_PROFILES[table_sig][0]
    # live measurements win over the card
    model.observe_profile(sig, 40.0, 60.0, 5000)
    assert model.profile_of(sig).source == "measured"


def test_a_memory_reading_replaces_the_cards_footprint_and_gates_sharing() -> None:
    model = default_model()
    sig = card_signature(VIT)
    model.add_card(sig, VIT)
    card_mem = model.profile_of(sig).mem_mib
    other = "ResNet-18 (batch size 16)"
    room = 16160 - GAVEL_PROFILES[other][2] - RESERVE_MIB  # what is left next to it on a V100
    assert (card_mem < room) == model.fits([sig, other], 16160)
    model.observe_memory(sig, room + 100)  # it holds more than predicted (counted with the caps' margin)
    assert model.profile_of(sig).mem_mib == with_margin(room + 100) and model.profile_of(sig).source == "card"
    assert not model.fits([sig, other], 16160)
    assert model.co_speeds([sig, other], "v100") == (0.0, 0.0)
    model.observe_memory(sig, 100)  # a smaller reading: an EWMA step down, not to it
    assert model.profile_of(sig).mem_mib == with_margin(round(room + 100 + 0.3 * (100 - room - 100)))


def test_card_jobs_are_rows_of_the_completion_shrunk_to_their_predicted_biases() -> None:
    model = default_model()
    sig = card_signature(VIT)
    before = model.pair_speeds(sig, "ResNet-18 (batch size 16)", "v100")
    d = model.profile_of(sig)  # the default profile: analytic speeds
    assert before[0] == pytest.approx(
        analytic_speed(d.util_peak, GAVEL_PROFILES["ResNet-18 (batch size 16)"][0])
    )
    model.add_card(sig, VIT)
    with_card = model.pair_speeds(sig, "ResNet-18 (batch size 16)", "v100")
    shifted = dataclasses.replace(VIT, batch=33)  # another card: other priors
    sig2 = card_signature(shifted)
    model.add_card(sig2, shifted)
    assert with_card != before and min(with_card) >= 0.05 and max(with_card) <= 1.0
    # observing the card job pulls its row towards what was measured
    for _ in range(6):
        model.observe_pair(sig, "ResNet-50 (batch size 16)", "v100", 0.2, 0.3)
    after = model.pair_speeds(sig, "ResNet-18 (batch size 16)", "v100")
    assert after[0] < with_card[0]


def test_a_new_gpu_type_learns_its_analytic_constants() -> None:
    """Pairs observed on a GPU type the table lacks fit its own constants of the analytic model
    (which answers for jobs with no row in the completion: hints, the default)."""
    assert fit_constants([]) == (ALPHA, GAMMA)
    model = InterferenceModel(packaged_table(), profiles={})  # nothing is a table type here
    a, b = card_signature(VIT), card_signature(R18)
    model.add_card(a, VIT)
    model.add_card(b, R18)
    assert model.constants("h200") == (ALPHA, GAMMA)

    def harsh(own: str, other: str) -> float:  # this GPU type: co-runners hurt much more
        p, q = model.profile_of(own), model.profile_of(other)
        return analytic_speed(p.util_peak, q.util_avg, 0.45, 2.0)

    hinted = JobSpec(command=("t",), hints=ProfileHints(util_avg=30.0, util_peak=60.0, mem_mib=1000))
    h = model.signature(hinted)
    v100_guess = model.pair_speeds(h, a, "h200")
    for x, y in ((a, b), (a, a), (b, b)):
        model.observe_pair(x, y, "h200", harsh(x, y), harsh(y, x))
    learned = model.constants("h200")
    assert learned != (ALPHA, GAMMA) and model.constants("v100") == (ALPHA, GAMMA)
    truth = (harsh(h, a), harsh(a, h))
    guess = model.pair_speeds(h, a, "h200")
    assert sum(abs(g - t) for g, t in zip(guess, truth, strict=True)) < 0.5 * sum(
        abs(g - t) for g, t in zip(v100_guess, truth, strict=True)
    )
    assert GPUS["h200"].memory_mib > GPUS["v100"].memory_mib
