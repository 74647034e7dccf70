"""Pieces of a packing Problem both builders share: the pair-speed tables and speed floors per
job class, and the policy's pair filter type.

Policies build the Problem with the cached, vectorised :mod:`.assemble`; the plain per-job
builder it must agree with (:mod:`horus_core.testing.plain_problem`) is a test oracle only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel

# Given the kernel's job classes (signature, GPUs) and one GPU kind's speed matrix, say which
# pairs may share a GPU (True) - the policy's own co-location rule on top of memory.
PairFilter = Callable[[NDArray[np.float64], Sequence[tuple[str, int]]], NDArray[np.bool_]]


def class_floors(keys: Sequence[tuple[str, int]], by_sig: dict[str, float]) -> NDArray[np.float64]:
    """Speed floor per job class: the kernel knows jobs by class, so a class takes the highest
    floor of its signature's live jobs (a floor is never broken; a job may be refused a share
    that only a stricter job of the same workload needed to refuse). docs/policies.md."""
    return np.array([by_sig.get(sig, 0.0) for sig, _ in keys], np.float64)


def class_speeds(
    model: InterferenceModel,
    keys: Sequence[tuple[str, int]],
    kinds: Sequence[tuple[str, int]],
    split_by_gpus: bool,
    pair_filter: PairFilter | None,
) -> NDArray[np.float64]:
    """``speed[kind, a, b]`` for the job classes ``keys`` (0.0: may not share)."""
    sigs = sorted({sig for sig, _ in keys})
    pos = np.array([sigs.index(sig) for sig, _ in keys], np.int64)
    out = np.zeros((max(1, len(kinds)), len(keys), len(keys)))
    same_gpus = np.equal.outer([g for _, g in keys], [g for _, g in keys])
    for k, (gtype, mib) in enumerate(kinds):
        s = model.pair_matrix(sigs, gtype, mib)[np.ix_(pos, pos)]
        if split_by_gpus:
            s = np.where(same_gpus, s, 0.0)
        if pair_filter is not None:
            s = np.where(pair_filter(s, keys), s, 0.0)
        out[k] = s
    return out
