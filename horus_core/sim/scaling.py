"""What a gang larger than the measured counts runs at, and what crossing nodes and racks costs.

Scaling rule: Gavel's table measures each job type at 1, 2, 4 and 8 GPUs (one node). Beyond the
largest measured count ``m`` a job's solo throughput follows a per-(job type, GPU type) power law
``rate(w) = a * w**b`` fitted by least squares to ``log rate`` over ``log w`` at the measured
counts, scaled so that it passes through the measured rate at ``m`` (the extrapolation starts
where the data ends), with ``b`` clamped to [0, 1] (more GPUs never make a job slower, nor
faster than linear). A type measured at fewer than two counts has no slope to fit and keeps
being lowered to its measured count, as Gavel's ``*_cap`` traces do.

Crossing cost: the table's rates are inside one node. A gang spread over ``n`` nodes in ``r``
racks runs at ``node_factor ** (n - 1) * rack_factor ** (r - 1)`` of that rate (defaults
:data:`NODE_FACTOR` per extra node, :data:`RACK_FACTOR` per extra rack; ``horus-sim
--cross-node-factor/--cross-rack-factor``). A job on one node pays nothing, so runs where every
job fits on one node are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NODE_FACTOR = 0.9  # per extra node: inter-node all-reduce is slower than NVLink inside a node
RACK_FACTOR = 0.9  # per extra rack: traffic crosses the spine, on top of the node cost
MEASURED_COUNTS = (1, 2, 4, 8)


def fit_power(counts: Sequence[int], rates: Sequence[float]) -> float | None:
    """The exponent ``b`` of ``rate = a * w**b`` (least squares in log-log, clamped to [0, 1]),
    from the positive measured points; None with fewer than two distinct counts."""
    pts = [(w, r) for w, r in zip(counts, rates, strict=True) if r > 0 and w > 0]
    if len({w for w, _ in pts}) < 2:
        return None
    x = np.log([w for w, _ in pts])
    y = np.log([r for _, r in pts])
    slope = float(np.polyfit(x, y, 1)[0])
    return min(max(slope, 0.0), 1.0)


def extrapolate(counts: Sequence[int], rates: Sequence[float], gpus: int) -> float | None:
    """Solo throughput at ``gpus`` beyond the largest measured count (see the module doc)."""
    b = fit_power(counts, rates)
    if b is None:
        return None
    top, rate = max((w, r) for w, r in zip(counts, rates, strict=True) if r > 0)
    return float(rate * (gpus / top) ** b)


def crossing(
    nodes: int, racks: int, node_factor: float = NODE_FACTOR, rack_factor: float = RACK_FACTOR
) -> float:
    """The share of its one-node rate a gang keeps on ``nodes`` nodes in ``racks`` racks."""
    if nodes < 1 or racks < 1:
        raise ValueError(f"a gang spans at least one node and rack, got {nodes} node(s), {racks} rack(s)")
    return float(node_factor ** (nodes - 1) * rack_factor ** (racks - 1))


def check_factor(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise ValueError(f"{name} must be within (0, 1], got {value}")
