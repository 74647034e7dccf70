"""Scheduling policies, all behind :class:`horus_core.policies.base.Policy`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from horus_core.errors import InvalidArgument
from horus_core.policies import binpack, gandiva, gavel, horus, horus_plus, iasp, lucid, optimus
from horus_core.policies.base import Policy
from horus_core.policies.fifo import FifoPolicy

if TYPE_CHECKING:
    from horus_core.interference import InterferenceModel

# A factory gets the interference model to use (None: the packaged default) and returns a policy.
Factory = Callable[["InterferenceModel | None"], Policy]

_FACTORIES: dict[str, Factory] = {
    "fifo": lambda _model: FifoPolicy(),
    "binpack": binpack.make,
    "gandiva": gandiva.make,
    "horus": horus.make,
    "horus-paper": horus.make_paper,
    "horus-util": horus.make_util,
    "horus-las": horus.make_las,
    "horus+": horus_plus.make,
    "lucid": lucid.make,
    "iasp": iasp.make,
    **{name: gavel.factory(name) for name in gavel.VARIANTS},
    "optimus": optimus.make,
}


def register(name: str, factory: Factory) -> None:
    _FACTORIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_FACTORIES)


def make_policy(
    name: str, interference: InterferenceModel | None = None, *, round_s: float | None = None
) -> Policy:
    """The policy ``name``; ``round_s`` sets a Gavel policy's round length (None: the
    ``HORUS_GAVEL_ROUND_S`` environment variable, else 360 s; other policies ignore it)."""
    if round_s is not None and name in gavel.VARIANTS:
        return gavel.make(name, interference, round_s)
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InvalidArgument(
            "policy", f"unknown policy {name!r}; choose one of {', '.join(policy_names())}"
        ) from None
    return factory(interference)


__all__ = ["Policy", "make_policy", "policy_names", "register"]
