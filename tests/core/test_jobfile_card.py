"""Job files carry a model card in a ``model:`` block, both ways; a bad card names its field."""

from __future__ import annotations

import json

import pytest

from horus_core import jobfile
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from horus_core.modelcard import card_to_dict, packaged_cards

CARD = packaged_cards()["LM (batch size 20)"]


def test_the_model_block_round_trips() -> None:
    spec = JobSpec(command=("python", "lm.py"), job_type="my-lm", model_card=CARD)
    text = jobfile.dump(spec)
    assert "model:" in text and "flops:" in text
    assert jobfile.load(text).spec == spec


def test_an_inline_json_card_is_a_model_block_too() -> None:
    text = f"run: python lm.py\nmodel: {json.dumps(card_to_dict(CARD))}\n"
    assert jobfile.load(text).spec.model_card == CARD


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({**card_to_dict(CARD), "batch": 0}, "model.batch"),
        ({**card_to_dict(CARD), "extra": 1}, "model.extra"),
        ({**card_to_dict(CARD), "flops": {"forward": 1.0}}, "model.flops.step"),
        ("resnet50", "model"),
    ],
)
def test_a_bad_card_names_its_field_and_line(model: object, field: str) -> None:
    text = f"name: x\nrun: python t.py\nmodel: {json.dumps(model)}\n"
    with pytest.raises(InvalidArgument) as err:
        jobfile.load(text)
    assert err.value.field == field and "(line 3)" in err.value.message
