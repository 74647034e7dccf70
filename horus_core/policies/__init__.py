"""Scheduling policies, all behind :class:`horus_core.policies.base.Policy`."""

from __future__ import annotations

from collections.abc import Callable

from horus_core.errors import InvalidArgument
from horus_core.interference import InterferenceModel, default_model
from horus_core.policies import binpack, gandiva, gavel, horus, horus_plus, lucid, optimus
from horus_core.policies.base import Policy
from horus_core.policies.fifo import FifoPolicy
from horus_core.policies.gputypes import HeteroRule, TypeGate

# A factory gets the interference model to use (None: the packaged default) and returns a policy.
Factory = Callable[[InterferenceModel | None], Policy]


def _gated(factory: Factory, *, hetero: bool = False) -> Factory:
    """``factory``'s policy wrapped in a :class:`TypeGate` (GPU types a job accepts; with
    ``hetero``, kept off types where it runs much slower, see :mod:`.gputypes`)."""

    def make(model: InterferenceModel | None) -> Policy:
        policy = factory(model)
        model_ = getattr(policy, "model", None) or default_model()
        return TypeGate(policy, model_, HeteroRule() if hetero else None)

    return make


_FACTORIES: dict[str, Factory] = {
    "fifo": _gated(lambda _model: FifoPolicy()),
    "binpack": _gated(binpack.make),
    "gandiva": _gated(gandiva.make),
    "horus": _gated(horus.make, hetero=True),
    "horus-paper": _gated(horus.make_paper),
    "horus+": _gated(horus_plus.make),
    "lucid": _gated(lucid.make),
    **{name: gavel.factory(name) for name in gavel.VARIANTS},
    "optimus": optimus.make,
}


def register(name: str, factory: Factory) -> None:
    _FACTORIES[name] = factory


def policy_names() -> list[str]:
    return sorted(_FACTORIES)


def make_policy(name: str, interference: InterferenceModel | None = None) -> Policy:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InvalidArgument(
            "policy", f"unknown policy {name!r}; choose one of {', '.join(policy_names())}"
        ) from None
    return factory(interference)


__all__ = ["Policy", "make_policy", "policy_names", "register"]
