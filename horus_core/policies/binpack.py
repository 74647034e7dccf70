"""``binpack``: naive co-location by free memory, blind to interference.

Jobs in arrival order; each goes to the GPU (a gang: the node) with the least memory left free
after placing it, up to 3 jobs per GPU, as long as memory fits (the only thing it checks,
together with the table's out-of-memory pairs). What Gavel calls "fifo with packing": it fills
GPUs, and pays for it in interference.
"""

from __future__ import annotations

from horus_core.packing import codes
from horus_core.packing.problem import PackParams
from horus_core.policies.packing_config import Packing, by_arrival
from horus_core.policies.reasons import interference_text

BINPACK = Packing(
    "binpack", PackParams(mode=codes.MODE_BINPACK, max_per_gpu=3), interference_text(0.0), by_arrival
)
