"""An example policy, ``fewest-gpus``: the ``horus`` packing rule, serving the jobs that ask for
the fewest GPUs first (``docs/adding-a-policy.md`` walks through it).

    horus-sim --policy-module examples/fewest_gpus_policy.py --policies fewest-gpus,horus ...
    horus-master --policy-module examples/fewest_gpus_policy.py --policy fewest-gpus ...

It is one stage written here, the queue order, and a configuration of the packing shell for
the rest: GPU-type tiers, the head gang's reservation (which keeps big gangs from starving
behind the small jobs this order favours), the kernel and its co-location rule.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.policies.api import (
    HORUS,
    ClusterLayout,
    Live,
    Packing,
    PackingPolicy,
    by_keys,
    factory,
    register,
)


def fewest_gpus_first(
    policy: PackingPolicy, live: Live, layout: ClusterLayout, now: float
) -> NDArray[np.intp]:
    """Higher priority first, then fewer GPUs, then arrival (ids break ties): positions into
    ``live.pending``, the pass's pending jobs as columns of the job table."""
    return by_keys([-live.p_prio, live.p_gpus.astype(np.int64), live.p_sub], live.p_ids)


FEWEST_GPUS = Packing("fewest-gpus", HORUS.params, HORUS.refused, fewest_gpus_first, hetero=True)

register("fewest-gpus", factory(FEWEST_GPUS))
