"""Greedy interference-aware bin-packing of jobs onto GPUs (a Numba kernel; its plain-Python twin,
the test oracle, is :mod:`horus_core.testing.kernel_twin`).

Pure: numpy and numba only. See ``docs/placement.md`` for the contract and the algorithm.
"""

from __future__ import annotations

from horus_core.packing import codes
from horus_core.packing._run import place
from horus_core.packing.build import PairFilter
from horus_core.packing.problem import PackParams, Placement, Problem

__all__ = [
    "PackParams",
    "PairFilter",
    "Placement",
    "Problem",
    "codes",
    "place",
]
