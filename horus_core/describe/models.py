"""Naming a model to describe: ``torchvision:NAME``, ``path/to/file.py:FUNCTION`` or
``package.module:FUNCTION``, built with random weights (on the meta device where it can be), and
an input shape written ``3x224x224``."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from horus_core.describe._torch import torch, torchvision
from horus_core.describe.count import DEFAULT_OPTIMIZER, DescribeError, describe
from horus_core.modelcard import MAX_DIM, MAX_DIMS, ModelCard

INPUT_DTYPES = ("float32", "int64")
_SHAPE = re.compile(r"^[0-9]+(x[0-9]+)*$")


def parse_shape(text: str) -> tuple[int, ...]:
    """``3x224x224`` -> (3, 224, 224): one sample's shape, without the batch."""
    cleaned = text.strip().lower().replace("×", "x")
    if not _SHAPE.match(cleaned):
        raise DescribeError(f"input shape {text!r}: expected dimensions joined by x, e.g. 3x224x224")
    dims = tuple(int(d) for d in cleaned.split("x"))
    if len(dims) > MAX_DIMS or not all(1 <= d <= MAX_DIM for d in dims):
        raise DescribeError(f"input shape {text!r}: 1 to {MAX_DIMS} dimensions, each 1 to {MAX_DIM}")
    return dims


def build(spec: str) -> Any:
    """The module ``spec`` names, with random weights: on the meta device if it builds there,
    else on the CPU (code that loads weights or calls ``.item()`` while building)."""
    make = _maker(spec)
    try:
        with torch().device("meta"):
            return make()
    except (RuntimeError, NotImplementedError):
        return make()


def _maker(spec: str) -> Any:
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        close = _like(spec)[:3] if _BARE.match(spec) else []
        more = f" (or {', '.join(close[1:])})" if len(close) > 1 else ""
        hint = f"; did you mean torchvision:{close[0]}{more}?" if close else ""
        raise DescribeError(
            f"model {spec!r}: expected torchvision:NAME, FILE.py:FUNCTION or MODULE:FUNCTION{hint}"
        )
    if where == "torchvision":
        models = torchvision().models
        if name not in models.list_models():
            close = _like(name)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise DescribeError(f"torchvision has no model {name!r}{hint}")
        return lambda: models.get_model(name, weights=None)
    module = _load_file(where) if where.endswith(".py") or "/" in where else _import(where)
    function = getattr(module, name, None)
    if not callable(function):
        raise DescribeError(f"{where} has no function {name!r}")
    return function


_BARE = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")  # a name without a source: maybe a torchvision model


def _like(name: str) -> list[str]:
    """torchvision's models spelt most like ``name`` (``resnet181``: resnet18 first), then those
    sharing its first letters; none without torchvision."""
    try:
        names = list(torchvision().models.list_models())
    except ImportError:
        return []
    low = name.lower()
    close = difflib.get_close_matches(low, names, n=3, cutoff=0.75)
    return list(dict.fromkeys([*close, *(m for m in names if m.startswith(low[:4]))]))[:5]


def _load_file(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise DescribeError(f"no such file: {path}")
    unit = importlib.util.spec_from_file_location(f"_horus_describe_{file.stem}", file)
    if unit is None or unit.loader is None:
        raise DescribeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(unit)
    sys.path.insert(0, str(file.resolve().parent))  # (its own imports, as `python file.py` would)
    try:
        unit.loader.exec_module(module)
    finally:
        sys.path.remove(str(file.resolve().parent))
    return module


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise DescribeError(f"cannot import {name}: {exc}") from None


def describe_named(
    spec: str,
    *,
    batch: int,
    input_shape: tuple[int, ...],
    input_dtype: str = "float32",
    optimizer: str = DEFAULT_OPTIMIZER,
    dtype: str = "float32",
    amp: bool = False,
) -> ModelCard:
    """The card of the model ``spec`` names, trained at ``batch`` on inputs of ``input_shape``."""
    if batch < 1:
        raise DescribeError(f"batch must be at least 1, got {batch}")
    if input_dtype not in INPUT_DTYPES:
        raise DescribeError(f"input dtype {input_dtype!r}: one of {', '.join(INPUT_DTYPES)}")
    t = torch()
    module = build(spec)
    kind = t.int64 if input_dtype == "int64" else t.float32
    example = t.zeros((batch, *input_shape), dtype=kind, device="meta")
    return describe(module, example, model=spec, optimizer=optimizer, dtype=dtype, amp=amp)
