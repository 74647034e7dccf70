"""The cards of the reference models (:mod:`.reference`), shipped as
``horus_core/data/reference_cards.json`` for the predictor's training and for ``horus-sim
--cold-start --cards``. Reproduce (needs the describe extra; a test checks the file is this):

    python -m horus_core.describe.cards [--out horus_core/data/reference_cards.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from horus_core.describe._torch import torch
from horus_core.describe.count import describe
from horus_core.describe.reference import REFERENCES, Reference
from horus_core.modelcard import ModelCard, card_to_dict

PACKAGED = Path(__file__).resolve().parents[1] / "data" / "reference_cards.json"


def reference_card(ref: Reference) -> ModelCard:
    """The card of one reference job, described on the meta device as its trainer runs it."""
    with torch().device("meta"):
        module = ref.build()
    t = torch()
    x = t.zeros((ref.batch, *ref.input_shape), dtype=t.int64 if ref.tokens else t.float32, device="meta")
    return describe(module, x, model=f"reference:{ref.job_type}", optimizer=ref.optimizer)


def reference_cards() -> dict[str, ModelCard]:
    return {name: reference_card(ref) for name, ref in REFERENCES.items()}


def cards_text(cards: dict[str, ModelCard]) -> str:
    body = {name: card_to_dict(card) for name, card in cards.items()}
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGED)
    args = parser.parse_args()
    args.out.write_text(cards_text(reference_cards()), encoding="utf-8")
    print(f"wrote {len(REFERENCES)} cards to {args.out}")


if __name__ == "__main__":
    main()
