"""Open-addressing tables of int64 keys in flat arrays (Numba): the kernel's state classes and
assemble's job classes look their keys up the same way."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper

I64 = NDArray[np.int64]
FREE = -1  # an empty slot of ``keys`` (keys are >= 0)


@helper
def slot_of(keys: I64, key: int) -> int:
    """The slot of ``keys`` (a power of 2 long, never full) that holds ``key``, else the free
    slot where it goes (linear probing)."""
    mask = keys.shape[0] - 1
    mixed = key ^ (key >> 29)  # (high bits, as a signature code above bit 32, folded in)
    h = ((mixed * 2654435761) >> 11) & mask
    while keys[h] != FREE and keys[h] != key:
        h = (h + 1) & mask
    return int(h)
