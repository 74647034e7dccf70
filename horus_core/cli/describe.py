"""``hctl describe MODEL --batch N --input 3x224x224 [-o card.json]``: a model card, made here.

Needs the ``describe`` extra (torch); no master and no GPU. The card goes to stdout (or the file
``-o`` names) and is what ``hctl submit --model-card FILE`` sends. docs/prediction.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from horus_core.cli.base import Subparsers
from horus_core.cli.output import Output
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument
from horus_core.modelcard import DTYPES, card_to_json


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    del common  # (no master: the connection options mean nothing here, and -o is the card's file)
    text = "describe a PyTorch model (a model card: FLOPs, parameters, memory, layers); no GPU needed"
    p = sub.add_parser("describe", help=text, description=text)
    p.set_defaults(func=describe_model, interrupt_ok=False, offline=True)
    p.add_argument("model", help="torchvision:NAME, path/to/file.py:FUNCTION or package.module:FUNCTION")
    p.add_argument("--batch", type=int, required=True, help="the training batch size")
    p.add_argument("--input", required=True, metavar="SHAPE", help="one sample's shape, e.g. 3x224x224 or 35")
    p.add_argument("--input-dtype", default="float32", choices=("float32", "int64"), help="int64: token ids")
    p.add_argument(
        "--optimizer", default="adam", help="sgd, sgd-momentum, rmsprop, adagrad, adam, adamw, lamb"
    )
    p.add_argument("--dtype", default="float32", choices=DTYPES, help="the training dtype")
    p.add_argument("--amp", action="store_true", help="mixed precision (the forward in --dtype)")
    p.add_argument("-o", "--out", dest="card_out", type=Path, metavar="FILE", help="write the card here")


async def describe_model(_client: HorusClient | None, args: argparse.Namespace, _out: Output) -> int:
    try:
        from horus_core.describe import DescribeError, MissingTorch, describe_named, parse_shape
    except ImportError as exc:  # (the package itself is always there; torch may not be)
        raise InvalidArgument("describe", str(exc)) from None
    try:
        card = describe_named(
            args.model,
            batch=args.batch,
            input_shape=parse_shape(args.input),
            input_dtype=args.input_dtype,
            optimizer=args.optimizer,
            dtype=args.dtype,
            amp=args.amp,
        )
    except MissingTorch as exc:
        print(f"hctl: error: {exc}", file=sys.stderr)
        return 1
    except DescribeError as exc:
        raise InvalidArgument("describe", str(exc)) from None
    text = card_to_json(card, indent=2) + "\n"
    if args.card_out is None:
        sys.stdout.write(text)
    else:
        args.card_out.write_text(text, encoding="utf-8")
    return 0
