"""Greedy interference-aware bin-packing of jobs onto GPUs (Numba kernel + Python twin).

Pure: numpy and numba only. See ``docs/placement.md`` for the contract and the algorithm.
"""

from __future__ import annotations

from horus_core.packing import codes
from horus_core.packing._reference import place_reference
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
    "place_reference",
]
