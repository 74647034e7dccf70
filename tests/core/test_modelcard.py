"""Model cards: the JSON round trip, the identity, and every rule a card must satisfy (each bad
card refused with its field named)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from horus_core.errors import InvalidArgument
from horus_core.modelcard import (
    MAX_CARD_BYTES,
    ModelCard,
    card_digest,
    card_signature,
    card_to_dict,
    card_to_json,
    check_card,
    packaged_cards,
    parse_card,
    parse_cards,
)

CARD = ModelCard(
    model="torchvision:resnet18",
    batch=32,
    input_shape=(3, 32, 32),
    flops_forward=2.4e9,
    flops_step=7.05e9,
    params=11_689_512,
    param_bytes=46_758_048,
    grad_bytes=46_758_048,
    optimizer_bytes=93_516_096,
    activation_bytes=14_715_392,
    layers=(("conv", 20), ("linear", 1), ("norm", 20)),
    ops_step=351,
    described_with="torch 2.13.0 on meta",
)


def _raw() -> dict[str, Any]:
    return copy.deepcopy(card_to_dict(CARD))


def test_json_round_trip_keeps_every_field() -> None:
    assert parse_card(card_to_json(CARD)) == CARD
    assert parse_card(card_to_json(CARD, indent=2)) == CARD
    assert CARD.static_bytes == 46_758_048 * 2 + 93_516_096
    assert CARD.layer_count("conv") == 20 and CARD.layer_count("recurrent") == 0


def test_identity_ignores_the_tool_but_not_the_model() -> None:
    other_tool = dataclasses.replace(CARD, described_with="torch 2.4.0 on cpu")
    assert card_digest(other_tool) == card_digest(CARD)
    bigger = dataclasses.replace(CARD, batch=64)
    assert card_digest(bigger) != card_digest(CARD)
    sig = card_signature(CARD)
    assert sig.startswith("card:torchvision:resnet18 (batch size 32) ") and len(sig) < 256


def test_optional_keys_take_their_defaults() -> None:
    raw = _raw()
    for key in ("dtype", "amp", "optimizer", "layers", "ops_step", "described_with"):
        del raw[key]
    card = parse_card(json.dumps(raw))
    assert (card.dtype, card.amp, card.optimizer, card.layers, card.ops_step) == (
        "float32",
        False,
        "adam",
        (),
        0,
    )


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("schema",), 2, "model_card.schema"),
        (("flops", "step"), -1.0, "model_card.flops.step"),
        (("flops", "step"), 1e30, "model_card.flops.step"),
        (("flops", "forward"), "many", "model_card.flops.forward"),
        (("flops", "step"), 1.0, "model_card.flops.step"),  # below the forward pass
        (("memory_bytes", "activations"), -5, "model_card.memory_bytes.activations"),
        (("memory_bytes", "params"), 1.5, "model_card.memory_bytes.params"),
        (("batch",), 0, "model_card.batch"),
        (("batch",), True, "model_card.batch"),
        (("params",), -1, "model_card.params"),
        (("input",), [], "model_card.input"),
        (("input",), [3, 0, 32], "model_card.input"),
        (("input",), "3x32x32", "model_card.input"),
        (("layers", "conv"), -2, "model_card.layers.conv"),
        (("layers", "transformer"), 3, "model_card.layers.transformer"),
        (("dtype",), "float8", "model_card.dtype"),
        (("amp",), "yes", "model_card.amp"),
        (("optimizer",), "Adam W!", "model_card.optimizer"),
        (("model",), "", "model_card.model"),
        (("model",), "x\ny", "model_card.model"),
        (("ops_step",), -3, "model_card.ops_step"),
        (("surprise",), 1, "model_card.surprise"),
        (("flops", "backward"), 1.0, "model_card.flops.backward"),
    ],
)
def test_a_bad_field_is_refused_by_name(path: tuple[str, ...], value: object, field: str) -> None:
    raw = _raw()
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidArgument) as err:
        parse_card(json.dumps(raw))
    assert err.value.field == field


def test_missing_keys_non_finite_numbers_and_size_are_refused() -> None:
    raw = _raw()
    del raw["memory_bytes"]["grads"]
    with pytest.raises(InvalidArgument, match=r"memory_bytes\.grads: missing"):
        parse_card(json.dumps(raw))
    text = card_to_json(CARD).replace("7050000000.0", "NaN")
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        parse_card(text)
    with pytest.raises(InvalidArgument, match="larger than"):
        parse_card(card_to_json(dataclasses.replace(CARD, described_with="x" * 100)) + " " * MAX_CARD_BYTES)
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        parse_card("{")
    with pytest.raises(InvalidArgument, match="JSON object"):
        parse_card("[1, 2]")


def test_check_card_holds_cards_made_in_process() -> None:
    with pytest.raises(InvalidArgument) as err:
        check_card(dataclasses.replace(CARD, flops_step=float("inf")))
    assert err.value.field == "model_card.flops.step"
    with pytest.raises(InvalidArgument) as err:
        check_card(dataclasses.replace(CARD, layers=(("conv", 1), ("conv", 2))))
    assert err.value.field == "model_card.layers"


def test_cards_file_names_the_entry_and_the_packaged_file_parses() -> None:
    good = {"a": _raw()}
    assert parse_cards(json.dumps(good))["a"] == CARD
    bad = {"a": _raw(), "b": {**_raw(), "batch": -1}}
    with pytest.raises(InvalidArgument) as err:
        parse_cards(json.dumps(bad))
    assert err.value.field == "cards['b'].model_card.batch"
    shipped = packaged_cards()
    assert "ResNet-50 (batch size 64)" in shipped and "CycleGAN" in shipped
    assert shipped["ResNet-50 (batch size 128)"].flops_step == pytest.approx(
        2 * shipped["ResNet-50 (batch size 64)"].flops_step
    )
