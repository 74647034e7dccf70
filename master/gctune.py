"""The master process's garbage-collector settings: what it holds once started is frozen out of
the collector's full passes, which otherwise stop the event loop for as long as they walk every
object (docs/reliability.md, "Load")."""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


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
