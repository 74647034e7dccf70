"""Model cards: what a job's model is (FLOPs, parameters, memory by kind, layer counts, batch,
input, dtype), as a versioned JSON document, and the rules a card must satisfy. Pure: stdlib only.

A card is made on the user's side with torch's own counters (:mod:`horus_core.describe`,
``hctl describe``); the master only reads it. Untrusted input: :func:`parse_card` refuses an
unknown schema version, unknown or missing keys, non-finite or negative numbers and oversized
documents, naming the field (``model_card.flops.step``). See docs/prediction.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from horus_core.errors import InvalidArgument

CARD_SCHEMA = 1
MAX_CARD_BYTES = 16 * 1024  # the card's JSON as sent; keeps a spec with a card far below 4 MiB
LAYER_KINDS = ("conv", "linear", "attention", "recurrent", "norm", "embedding", "activation", "other")
DTYPES = ("float32", "float16", "bfloat16")
MAX_FLOPS = 1e21  # per training step
MAX_BYTES = 1 << 50
MAX_PARAMS = 10**13
MAX_BATCH = 1 << 24
MAX_DIMS = 8
MAX_DIM = 1 << 24
MAX_LAYERS = 1 << 24
MAX_OPS = 1 << 40
MAX_NAME = 256
_WORD = re.compile(r"^[a-z0-9][a-z0-9_.+-]{0,31}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIELD = "model_card"


@dataclass(frozen=True, slots=True)
class ModelCard:
    """One training job's model at its batch size. FLOPs and bytes are per training step."""

    model: str  # what was described, e.g. "torchvision:resnet50" or "train.py:build_model"
    batch: int
    input_shape: tuple[int, ...]  # one sample's shape (token models: the sequence length)
    flops_forward: float
    flops_step: float  # forward + backward, as torch.utils.flop_counter counts them
    params: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int  # tensors the forward pass saves for the backward pass
    layers: tuple[tuple[str, int], ...] = ()  # (kind, count) for kinds of LAYER_KINDS, in that order
    ops_step: int = 0  # operators dispatched in one step (a proxy for kernel launches); 0 = not counted
    dtype: str = "float32"
    amp: bool = False
    optimizer: str = "adam"
    described_with: str = ""  # e.g. "torch 2.13.0 on meta" (not part of the identity)
    schema: int = CARD_SCHEMA

    @property
    def static_bytes(self) -> int:
        """Parameters, gradients and optimizer state."""
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes

    def layer_count(self, kind: str) -> int:
        return dict(self.layers).get(kind, 0)

    @property
    def total_layers(self) -> int:
        return sum(n for _, n in self.layers)


def card_to_dict(card: ModelCard) -> dict[str, Any]:
    return {
        "schema": card.schema,
        "model": card.model,
        "batch": card.batch,
        "input": list(card.input_shape),
        "dtype": card.dtype,
        "amp": card.amp,
        "optimizer": card.optimizer,
        "flops": {"forward": card.flops_forward, "step": card.flops_step},
        "params": card.params,
        "memory_bytes": {
            "params": card.param_bytes,
            "grads": card.grad_bytes,
            "optimizer": card.optimizer_bytes,
            "activations": card.activation_bytes,
        },
        "layers": dict(card.layers),
        "ops_step": card.ops_step,
        "described_with": card.described_with,
    }


def card_to_json(card: ModelCard, *, indent: int | None = None) -> str:
    """The card's JSON; compact and key-sorted (canonical) unless ``indent`` is given."""
    if indent is None:
        return json.dumps(card_to_dict(card), sort_keys=True, separators=(",", ":"))
    return json.dumps(card_to_dict(card), indent=indent)


def card_digest(card: ModelCard) -> str:
    """A stable identity of what the card describes (``described_with`` left out)."""
    body = card_to_dict(card)
    del body["described_with"]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def card_signature(card: ModelCard) -> str:
    """The workload signature of a job known only by its card (no ``job_type``)."""
    return f"card:{card.model[:120]} (batch size {card.batch}) {card_digest(card)}"


def card_summary(card: ModelCard) -> str:
    """One line for people: what, batch, FLOPs per step, parameters, memory by kind."""
    gib = 1 << 30
    return (
        f"{card.model}, batch {card.batch}, {card.flops_step / 1e12:.3g} TFLOP per step, "
        f"{card.params / 1e6:.3g} M parameters, {(card.static_bytes + card.activation_bytes) / gib:.3g} GiB "
        f"(weights, gradients and optimizer {card.static_bytes / gib:.3g}, "
        f"activations {card.activation_bytes / gib:.3g}), {card.dtype}{' AMP' if card.amp else ''}"
    )


# ---------------------------------------------------------------------------------- reading

_TOP = {
    "schema", "model", "batch", "input", "dtype", "amp", "optimizer", "flops", "params",
    "memory_bytes", "layers", "ops_step", "described_with",
}  # fmt: skip
_REQUIRED = _TOP - {"dtype", "amp", "optimizer", "layers", "ops_step", "described_with"}
_FLOPS = ("forward", "step")
_MEMORY = ("params", "grads", "optimizer", "activations")


def parse_card(text: str | bytes) -> ModelCard:
    """A card from its JSON, checked (:func:`check_card`); InvalidArgument names the bad field."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    if size > MAX_CARD_BYTES:
        raise InvalidArgument(_FIELD, f"larger than {MAX_CARD_BYTES} bytes ({size})")
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(_FIELD, f"not valid JSON: {exc}") from None
    return card_from_dict(raw)


def card_from_dict(raw: object) -> ModelCard:
    top = _mapping(_FIELD, raw)
    _keys(_FIELD, top, _TOP, _REQUIRED)
    schema = _int(f"{_FIELD}.schema", top["schema"], 1 << 16)
    if schema != CARD_SCHEMA:
        raise InvalidArgument(
            f"{_FIELD}.schema", f"version {schema} is not supported (this is {CARD_SCHEMA})"
        )
    flops = _mapping(f"{_FIELD}.flops", top["flops"])
    _keys(f"{_FIELD}.flops", flops, set(_FLOPS), set(_FLOPS))
    memory = _mapping(f"{_FIELD}.memory_bytes", top["memory_bytes"])
    _keys(f"{_FIELD}.memory_bytes", memory, set(_MEMORY), set(_MEMORY))
    layers = _mapping(f"{_FIELD}.layers", top.get("layers", {}))
    _keys(f"{_FIELD}.layers", layers, set(LAYER_KINDS), set())
    shape = top["input"]
    if not isinstance(shape, list):
        raise InvalidArgument(f"{_FIELD}.input", "expected a list of dimensions")
    card = ModelCard(
        model=_str(f"{_FIELD}.model", top["model"]),
        batch=_int(f"{_FIELD}.batch", top["batch"], MAX_BATCH),
        input_shape=tuple(_int(f"{_FIELD}.input", d, MAX_DIM) for d in shape[: MAX_DIMS + 1]),
        flops_forward=_float(f"{_FIELD}.flops.forward", flops["forward"]),
        flops_step=_float(f"{_FIELD}.flops.step", flops["step"]),
        params=_int(f"{_FIELD}.params", top["params"], MAX_PARAMS),
        param_bytes=_int(f"{_FIELD}.memory_bytes.params", memory["params"], MAX_BYTES),
        grad_bytes=_int(f"{_FIELD}.memory_bytes.grads", memory["grads"], MAX_BYTES),
        optimizer_bytes=_int(f"{_FIELD}.memory_bytes.optimizer", memory["optimizer"], MAX_BYTES),
        activation_bytes=_int(f"{_FIELD}.memory_bytes.activations", memory["activations"], MAX_BYTES),
        layers=tuple(
            (k, _int(f"{_FIELD}.layers.{k}", layers[k], MAX_LAYERS)) for k in LAYER_KINDS if k in layers
        ),
        ops_step=_int(f"{_FIELD}.ops_step", top.get("ops_step", 0), MAX_OPS),
        dtype=_str(f"{_FIELD}.dtype", top.get("dtype", "float32")),
        amp=_bool(f"{_FIELD}.amp", top.get("amp", False)),
        optimizer=_str(f"{_FIELD}.optimizer", top.get("optimizer", "adam")),
        described_with=_str(f"{_FIELD}.described_with", top.get("described_with", "")),
    )
    return check_card(card)


def check_card(card: ModelCard) -> ModelCard:
    """Return ``card`` if every field is within its bounds, else raise InvalidArgument."""
    f = _FIELD
    if card.schema != CARD_SCHEMA:
        raise InvalidArgument(
            f"{f}.schema", f"version {card.schema} is not supported (this is {CARD_SCHEMA})"
        )
    _text(f"{f}.model", card.model, MAX_NAME)
    if not card.model:
        raise InvalidArgument(f"{f}.model", "must not be empty")
    _text(f"{f}.described_with", card.described_with, MAX_NAME)
    _bounded(f"{f}.batch", card.batch, 1, MAX_BATCH)
    if not 1 <= len(card.input_shape) <= MAX_DIMS:
        raise InvalidArgument(
            f"{f}.input", f"expected 1 to {MAX_DIMS} dimensions, got {len(card.input_shape)}"
        )
    for dim in card.input_shape:
        _bounded(f"{f}.input", dim, 1, MAX_DIM)
    for name, value in (("flops.forward", card.flops_forward), ("flops.step", card.flops_step)):
        if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= MAX_FLOPS:
            raise InvalidArgument(
                f"{f}.{name}", f"must be a finite number in [0, {MAX_FLOPS:g}], got {value}"
            )
    if card.flops_step < card.flops_forward:
        raise InvalidArgument(f"{f}.flops.step", "a training step counts at least its forward pass")
    _bounded(f"{f}.params", card.params, 0, MAX_PARAMS)
    for name in ("param_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes"):
        _bounded(f"{f}.memory_bytes.{name.removesuffix('_bytes')}", getattr(card, name), 0, MAX_BYTES)
    kinds = [k for k, _ in card.layers]
    if len(set(kinds)) != len(kinds) or any(k not in LAYER_KINDS for k in kinds):
        raise InvalidArgument(f"{f}.layers", f"kinds must be distinct, among {', '.join(LAYER_KINDS)}")
    for kind, n in card.layers:
        _bounded(f"{f}.layers.{kind}", n, 0, MAX_LAYERS)
    _bounded(f"{f}.ops_step", card.ops_step, 0, MAX_OPS)
    if card.dtype not in DTYPES:
        raise InvalidArgument(f"{f}.dtype", f"must be one of {', '.join(DTYPES)}, got {card.dtype[:40]!r}")
    if not isinstance(card.amp, bool):
        raise InvalidArgument(f"{f}.amp", "must be true or false")
    if not _WORD.match(card.optimizer):
        raise InvalidArgument(
            f"{f}.optimizer", f"expected a short lowercase name, got {card.optimizer[:40]!r}"
        )
    return card


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON allows")


def _mapping(field: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgument(field, "expected a JSON object")
    return value


def _keys(field: str, value: Mapping[str, Any], allowed: set[str], required: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise InvalidArgument(f"{field}.{unknown[0][:40]}", "unknown key")
    missing = sorted(required - set(value))
    if missing:
        raise InvalidArgument(f"{field}.{missing[0]}", "missing")


def _int(field: str, value: object, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"expected a whole number, got {str(value)[:40]!r}")
    if not 0 <= value <= limit:
        raise InvalidArgument(field, f"must be within [0, {limit}], got {value}")
    return value


def _float(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(field, f"expected a number, got {str(value)[:40]!r}")
    return float(value)


def _str(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(field, "expected a string")
    return value


def _bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(field, "expected true or false")
    return value


def _bounded(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(field, f"must be a whole number in [{low}, {high}], got {str(value)[:40]}")


def _text(field: str, value: object, limit: int) -> None:
    if not isinstance(value, str):
        raise InvalidArgument(field, "expected a string")
    if len(value.encode("utf-8", "replace")) > limit:
        raise InvalidArgument(field, f"longer than {limit} bytes")
    if _CONTROL.search(value):
        raise InvalidArgument(field, "contains a control character")


# ---------------------------------------------------------------------------- files of cards

MAX_CARDS_FILE = 4 * 1024 * 1024


def parse_cards(text: str) -> dict[str, ModelCard]:
    """A cards file: a JSON object of workload signature -> card (``horus-sim --cards``)."""
    if len(text) > MAX_CARDS_FILE:
        raise InvalidArgument("cards", f"larger than {MAX_CARDS_FILE} bytes")
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidArgument("cards", f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InvalidArgument("cards", "expected a JSON object of job type -> card")
    out: dict[str, ModelCard] = {}
    for name, body in raw.items():
        _text("cards", name, MAX_NAME)
        try:
            out[name] = card_from_dict(body)
        except InvalidArgument as exc:
            raise InvalidArgument(f"cards[{name[:60]!r}].{exc.field}", exc.message) from None
    return out


@lru_cache(maxsize=1)
def packaged_cards() -> Mapping[str, ModelCard]:
    """The cards of the reference models (the pair table's job types and a few newer ones),
    made by ``python -m horus_core.describe.cards``; parsed once, immutable."""
    text = resources.files("horus_core.data").joinpath("reference_cards.json").read_text()
    return MappingProxyType(parse_cards(text))
