"""``horus``, ``horus-las``, ``horus-util`` and ``horus-paper``: interference-aware greedy packing.

``horus`` serves its queue least attained service first (Tiresias-style, no job lengths needed):
priority first, then the job's level of GPU-seconds run so far (boundaries growing
geometrically, :mod:`horus_core.policies.attained`), FIFO within a level; a running job of a
higher level than the first job left waiting is preempted once its attempt has run 6 minutes.
A job whose progress reports give a confident estimate of its remaining work (steps left at its
measured speed, :mod:`horus_core.policies.remaining`) is served shortest remaining work first
instead: its level is that of its remaining GPU-seconds, and it goes first within its level.
``horus-util`` and ``horus-paper`` serve it lowest predicted utilisation first (priority first,
arrival breaks ties) and never preempt. All use a look-ahead of 5: after 6 jobs could not be
placed the rest wait, so a big job is not passed forever.

Each job goes to the GPU (a gang: the node) of lowest Horus cost

    1.3 * (used + mem) / capacity + util_cost / 100 + jobs_on(gpu),
    util_cost = 1.6 * over if over > 0 else -over,  over = util(gpu) + util_peak(job) - 100,

at most 3 jobs per GPU and more than 500 MiB left free (the packing kernel, Numba). The
``jobs_on`` term makes an idle GPU always cheapest, so jobs share only when the cluster is busy.

``horus-paper`` is that rule alone, as the authors' simulator implements it: co-location is
limited only by memory, and the cost steers jobs away from oversubscribed GPUs.

``horus`` (the default) also reads the pair table directly (triples: products of pair speeds):
a job may join a GPU only if that raises the GPU's summed normalised speed by at least 0.15
(co-location must beat taking turns by 15 %) and nobody there falls below 0.3x: a fixed speed
floor refuses too much on loaded clusters, the gain rule packs exactly the pairs that finish
work faster together than apart (docs/history.md has the measurements that chose it;
docs/evaluation.md today's figures).

On mixed GPU types ``horus``, ``horus-las`` and ``horus-util`` add the heterogeneity-aware tiers
of :mod:`.gputypes` (a job's fast types first, much slower ones only after a bounded wait); a
single-type cluster decides exactly as above. ``horus`` also gives each job a type by an
allocation over effective throughput each pass (:mod:`.allocate`: solo speed per type, pair
speeds where it shares; the jobs that lose most on a slow type get the fast ones), tries that type
first, and moves a running job to the GPUs it should have when they free (:mod:`.upgrade`).
``horus-tiers`` is ``horus`` with the tiers alone, as it was before, for comparison. Each is a
:class:`~.packing_config.Packing` configuration of the one packing shell (:class:`~.pack.PackingPolicy`).
"""

from __future__ import annotations

import dataclasses
import math

from horus_core.packing import codes
from horus_core.packing.problem import PackParams
from horus_core.policies.packing_config import Packing, by_service, by_utilisation
from horus_core.policies.reasons import interference_text

MIN_SPEED = 0.3
MIN_GAIN = 0.15
LOOKAHEAD = 5


def params(min_speed: float = MIN_SPEED, min_gain: float = MIN_GAIN) -> PackParams:
    """The kernel's parameters of the Horus rule: the cost, at most 3 jobs per GPU, look-ahead 5."""
    return PackParams(
        mode=codes.MODE_HORUS, max_per_gpu=3, min_speed=min_speed, min_gain=min_gain, lookahead=LOOKAHEAD
    )


HORUS_TIERS = Packing(
    "horus-tiers",
    params(),
    interference_text(MIN_SPEED, MIN_GAIN),
    by_service,
    las=True,
    hears=True,
    hetero=True,
)
HORUS = dataclasses.replace(HORUS_TIERS, name="horus", allocate=True)
HORUS_LAS = Packing(
    "horus-las", params(), interference_text(MIN_SPEED, MIN_GAIN), by_service, las=True, hetero=True
)
HORUS_UTIL = Packing(
    "horus-util", params(), interference_text(MIN_SPEED, MIN_GAIN), by_utilisation, hetero=True
)
HORUS_PAPER = Packing(
    "horus-paper", params(0.0, -math.inf), interference_text(0.0, -math.inf), by_utilisation
)
