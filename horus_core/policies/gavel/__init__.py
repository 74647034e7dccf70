"""Gavel's policies (OSDI 2020) as LPs over classes of jobs, solved with SciPy's HiGHS.

``gavel-las`` (max-min fairness, heterogeneity-agnostic), ``gavel-las-perf`` (heterogeneity-aware),
``gavel-las-packed`` (with co-located pairs), ``gavel-ftf-perf`` (finish-time fairness) and
``gavel-makespan-perf`` (shortest makespan), all with Gavel's round mechanism. The round length
is ``HORUS_GAVEL_ROUND_S`` in the environment (seconds, default 360), or the ``round_s`` argument.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from horus_core.errors import InvalidArgument
from horus_core.policies.gavel.classes import weight_of
from horus_core.policies.gavel.policy import ROUND_S, VARIANTS, GavelPolicy

if TYPE_CHECKING:
    from horus_core.interference import InterferenceModel

ROUND_ENV = "HORUS_GAVEL_ROUND_S"


def round_s_from_env() -> float:
    raw = os.environ.get(ROUND_ENV, "")
    if not raw.strip():
        return ROUND_S
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgument(ROUND_ENV, f"must be a number of seconds, got {raw!r}") from None


def make(name: str, model: InterferenceModel | None = None, round_s: float | None = None) -> GavelPolicy:
    from horus_core.interference import default_model

    variant = VARIANTS.get(name)
    if variant is None:
        raise InvalidArgument("policy", f"unknown Gavel policy {name!r}; choose one of {', '.join(VARIANTS)}")
    length = round_s if round_s is not None else round_s_from_env()
    return GavelPolicy(variant, model or default_model(), length)


def factory(name: str) -> Callable[[InterferenceModel | None], GavelPolicy]:
    return lambda model: make(name, model)


__all__ = ["ROUND_ENV", "ROUND_S", "VARIANTS", "GavelPolicy", "factory", "make", "weight_of"]
