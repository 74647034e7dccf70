"""The master process's garbage-collector settings: what it holds once started is frozen out of
the collector's full passes, and young collections run less often, so that fewer short-lived
objects (a request in flight) live long enough to be walked by a full pass, which stops the event
loop for as long as it walks every object (docs/reliability.md, "Load")."""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

# Allocations between young collections (Python's default: 700). Under bench/load.py the
# default promoted enough in-flight objects for a full pass every ~10 s (200-500 ms each).
YOUNG_THRESHOLD = 20_000


def tune() -> int:
    """Once, after start-up: fewer young collections, then :func:`freeze_startup_objects`."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    return freeze_startup_objects()


def freeze_startup_objects() -> int:
    """Move every object alive now (modules, compiled kernels, the loaded live index) to the
    collector's permanent generation, so that a full collection walks only what came later; its
    pause shrinks accordingly. Objects frozen are never collected: call once, after start-up.
    Returns how many objects were frozen."""
    gc.collect()  # what start-up left as garbage goes now, not into the permanent generation
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("garbage collector: %d start-up objects frozen", frozen)
    return frozen
