"""The packing problem as flat arrays, the parameters, and the result."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core.interference.profiles import RESERVE_MIB
from horus_core.packing.codes import MODE_HORUS

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class PackParams:
    mode: int = MODE_HORUS
    max_per_gpu: int = 3  # jobs sharing one GPU, at most 3
    min_speed: float = 0.0  # refuse a GPU where anyone's predicted speed would drop below this
    min_gain: float = -math.inf  # refuse a GPU whose summed normalised speed would grow less than this
    lookahead: int = -1  # stop after this many jobs could not be placed (+1); -1 = try them all
    reserve_mib: int = RESERVE_MIB  # more than this stays free on every GPU


@dataclass(frozen=True, eq=False)
class Problem:
    """GPUs are numbered node by node: node n owns GPUs ``node_start[n]:node_start[n + 1]``.

    Job classes (``cls_*``) are what the interference data knows a job by; ``speed[k, a, b]``
    is the speed of class a sharing a GPU of kind k with class b (0.0 = may not share).
    """

    node_start: I32  # [nodes + 1]
    gpu_kind: I32  # [gpus] index into kind_cap / speed
    gpu_nres: I32  # [gpus] jobs already there (0..3)
    gpu_res: I32  # [gpus, 3] their job classes
    gpu_excl: B  # [gpus] an exclusive job is there
    kind_cap: I64  # [kinds] memory MiB
    cls_mem: I64  # [classes] MiB
    cls_util: F64  # [classes] util avg %
    cls_peak: F64  # [classes] util peak %
    speed: F64  # [kinds, classes, classes]
    job_cls: I32  # [jobs] in queue order
    job_gpus: I32
    job_excl: B
    # Speed floor per job class (issue 10): nobody of class c may drop below
    # max(PackParams.min_speed, cls_floor[c]). None: no floors. See class_floors.
    cls_floor: F64 | None = None

    def floors(self) -> F64:
        if self.cls_floor is not None:
            return self.cls_floor
        return np.zeros(self.cls_mem.shape[0], np.float64)

    @property
    def n_jobs(self) -> int:
        return int(self.job_cls.shape[0])

    @property
    def n_gpus(self) -> int:
        return int(self.gpu_kind.shape[0])

    def job_offsets(self) -> I64:
        out: I64 = np.zeros(self.n_jobs + 1, np.int64)
        np.cumsum(self.job_gpus, out=out[1:])
        return out


@dataclass(frozen=True, eq=False)
class Placement:
    node: I32  # [jobs] node index, -1 = not placed
    gpus: I32  # flat; job j's GPUs are gpus[offsets[j]:offsets[j + 1]] (-1 when not placed)
    offsets: I64
    speed: F64  # predicted normalised speed after the whole pass (0.0 when not placed)
    reason: I32  # codes.R_*
    detail: I32  # R_GANG: the largest feasible set on one node

    def gpus_of(self, job: int) -> I32:
        return self.gpus[self.offsets[job] : self.offsets[job + 1]]

    def same_as(self, other: Placement) -> bool:
        return all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("node", "gpus", "offsets", "speed", "reason", "detail")
        )
