"""Skew heaps in a shared array pool (Numba): one min-heap of indices per state class.

``heap[entry] = (item, left, right)``; items are GPU (or node) indices. An item leaves its
class for good (its resident set only grows during a pass), so stale entries are recognised by
``class_of[item] != class`` and dropped when they reach the top.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.jit import helper

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
KEY, LEFT, RIGHT = 0, 1, 2


@helper
def merge(a: int, b: int, heap: I32) -> int:
    """Top-down skew-heap merge of the heaps rooted at a and b (-1 = empty); returns the root."""
    if a < 0:
        return b
    if b < 0:
        return a
    if heap[b, KEY] < heap[a, KEY]:
        a, b = b, a
    root = a
    while True:
        nxt = heap[a, RIGHT]
        heap[a, RIGHT] = heap[a, LEFT]
        if nxt < 0:
            heap[a, LEFT] = b
            return root
        if heap[b, KEY] < heap[nxt, KEY]:
            nxt, b = b, nxt
        heap[a, LEFT] = nxt
        a = nxt


@helper
def push(root: int, item: int, ctr: I64, slot: int, heap: I32) -> int:
    """Add ``item`` to the heap at ``root``; ``ctr[slot]`` counts the pool entries used."""
    return merge(root, entry(item, ctr, slot, heap), heap)


@helper
def entry(item: int, ctr: I64, slot: int, heap: I32) -> int:
    """A pool entry holding ``item`` alone (a heap of one)."""
    node = ctr[slot]
    ctr[slot] = node + 1
    heap[node, KEY] = item
    heap[node, LEFT] = -1
    heap[node, RIGHT] = -1
    return int(node)


@helper
def clean_top(root: int, cls: int, heap: I32, class_of: I32) -> tuple[int, int]:
    """Drop stale entries: (new root, smallest item still in class ``cls`` or -1)."""
    while root >= 0 and class_of[heap[root, KEY]] != cls:
        root = merge(heap[root, LEFT], heap[root, RIGHT], heap)
    return root, (heap[root, KEY] if root >= 0 else -1)
