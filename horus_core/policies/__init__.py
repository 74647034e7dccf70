"""Scheduling policies, all behind :class:`horus_core.policies.base.Policy`."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from horus_core.errors import InvalidArgument
from horus_core.policies import binpack, gandiva, gavel, horus, horus_plus, iasp, lucid, makespan, optimus
from horus_core.policies.base import Policy
from horus_core.policies.fifo import Fifo
from horus_core.policies.pack import build, factory
from horus_core.policies.staged import drive

if TYPE_CHECKING:
    from horus_core.interference import InterferenceModel

# A factory gets the interference model to use (None: the packaged default) and returns a policy.
Factory = Callable[["InterferenceModel | None"], Policy]

_FACTORIES: dict[str, Factory] = {
    "fifo": lambda _model: drive(Fifo()),
    "binpack": factory(binpack.BINPACK),
    "gandiva": gandiva.make,
    "horus": factory(horus.HORUS),
    "horus-paper": factory(horus.HORUS_PAPER),
    "horus-util": factory(horus.HORUS_UTIL),
    "horus-las": factory(horus.HORUS_LAS),
    "horus-tiers": factory(horus.HORUS_TIERS),
    "horus+": factory(horus_plus.HORUS_PLUS),
    "lucid": factory(lucid.LUCID),
    "iasp": iasp.make,
    **{name: gavel.factory(name) for name in gavel.VARIANTS},
    "optimus": optimus.make,
}


def register(name: str, factory: Factory) -> None:
    """Make ``make_policy(name)`` (``horus-sim --policies``, ``horus-master --policy``) build a
    policy with ``factory`` (``docs/adding-a-policy.md``)."""
    _FACTORIES[name] = factory


def add_policy_module_option(parser: argparse.ArgumentParser) -> None:
    """The ``--policy-module FILE`` option (repeatable) of ``horus-sim`` and ``horus-master``."""
    why = "a Python file that registers policies (docs/adding-a-policy.md); repeatable"
    parser.add_argument("--policy-module", action="append", default=[], metavar="FILE", help=why)


def load_policy_module(path: str) -> list[str]:
    """Run the Python file ``path``, which registers policies (:func:`register`); returns the
    names it added (``--policy-module`` of ``horus-sim`` and ``horus-master``)."""
    before = set(_FACTORIES)
    spec = importlib.util.spec_from_file_location(f"horus_policy_module_{len(_MODULES)}", path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        raise InvalidArgument("policy_module", f"no Python file at {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a dataclass defined in it looks its module up there)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # (whatever the file raises: a clear error, not a traceback)
        del sys.modules[spec.name]
        raise InvalidArgument("policy_module", f"{path}: {type(exc).__name__}: {exc}") from None
    _MODULES.append(module)
    return sorted(set(_FACTORIES) - before)


_MODULES: list[ModuleType] = []  # the policy modules loaded (kept: their factories refer to them)


def policy_names() -> list[str]:
    return sorted(_FACTORIES)


OBJECTIVES = makespan.OBJECTIVES


def make_policy(
    name: str,
    interference: InterferenceModel | None = None,
    *,
    round_s: float | None = None,
    objective: str = "jct",
) -> Policy:
    """The policy ``name``; ``round_s`` sets a Gavel policy's round length (None: the
    ``HORUS_GAVEL_ROUND_S`` environment variable, else 360 s; other policies ignore it);
    ``objective`` (:data:`OBJECTIVES`) is what ``horus`` serves: each job's completion time
    (``jct``, the default) or the whole queue's (``makespan``, :mod:`.makespan`); other policies
    ignore it."""
    if objective not in OBJECTIVES:
        raise InvalidArgument(
            "objective", f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}"
        )
    if objective == "makespan" and name == "horus":
        return build(makespan.HORUS_MAKESPAN, interference)
    if round_s is not None and name in gavel.VARIANTS:
        return gavel.make(name, interference, round_s)
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InvalidArgument(
            "policy", f"unknown policy {name!r}; choose one of {', '.join(policy_names())}"
        ) from None
    return factory(interference)


__all__ = [
    "OBJECTIVES",
    "Policy",
    "add_policy_module_option",
    "load_policy_module",
    "make_policy",
    "policy_names",
    "register",
]
