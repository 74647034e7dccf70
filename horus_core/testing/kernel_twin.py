"""Plain-Python twin of the packing kernel: the same contract, computed GPU by GPU.

Slow on purpose (every job scans every GPU) and written to be read: it is the specification
the property tests hold the kernel to, placement for placement.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from horus_core.packing.codes import (
    MODE_HORUS,
    R_GANG,
    R_LOOKAHEAD,
    R_NO_GPUS,
    ST_FULL,
    ST_INTERFERENCE,
    ST_MEMORY,
    ST_OK,
)
from horus_core.packing.problem import PackParams, Placement, Problem

I64 = NDArray[np.int64]


class _Cluster:
    def __init__(self, p: Problem, params: PackParams) -> None:
        self.p = p
        self.params = params
        self.res: list[list[int]] = [[int(r) for r in p.gpu_res[d, : p.gpu_nres[d]]] for d in range(p.n_gpus)]
        self.excl = [bool(x) for x in p.gpu_excl]
        self.speed = p.speed.tolist()

    def evaluate(self, d: int, t: int, exclusive: bool) -> tuple[int, float]:
        """(stage, cost) of a job of class t on GPU d."""
        res = self.res[d]
        if self.excl[d] or len(res) >= self.params.max_per_gpu or (exclusive and res):
            return ST_FULL, 0.0
        p, k = self.p, int(self.p.gpu_kind[d])
        cap = int(p.kind_cap[k])
        used = sum(int(p.cls_mem[r]) for r in res)
        if cap - used - int(p.cls_mem[t]) <= self.params.reserve_mib:
            return ST_MEMORY, 0.0
        if not self.speeds_ok(k, t, res):
            return ST_INTERFERENCE, 0.0
        return ST_OK, self.cost(t, cap, used, sum(float(p.cls_util[r]) for r in res), len(res))

    def speeds_ok(self, k: int, t: int, res: list[int]) -> bool:
        if not res:
            return True
        s = self.speed[k]
        if any(s[t][r] <= 0.0 or s[r][t] <= 0.0 for r in res):
            return False
        residents = sorted(res)
        everyone = [t, *residents]
        speeds = []
        for i, a in enumerate(everyone):
            speed = 1.0
            for b in everyone[:i] + everyone[i + 1 :]:
                speed *= s[a][b]
            speeds.append(speed)
        before = 1.0 if len(res) == 1 else s[residents[0]][residents[1]] + s[residents[1]][residents[0]]
        after = 0.0
        for speed in speeds:
            after += speed
        params = self.params
        floors = self.p.floors()
        low = any(
            sp < max(params.min_speed, float(floors[a])) for a, sp in zip(everyone, speeds, strict=True)
        )
        return not low and after >= before + params.min_gain

    def cost(self, t: int, cap: int, used: int, util: float, n: int) -> float:
        mem = int(self.p.cls_mem[t])
        if self.params.mode == MODE_HORUS:
            mem_cost = (used + mem) / cap
            over = util + float(self.p.cls_peak[t]) - 100.0
            util_cost = 1.6 * over if over > 0.0 else -over
            return 1.3 * mem_cost + util_cost / 100.0 + n
        return (cap - used - mem) / cap

    def final_speed(self, t: int, gpus: list[int]) -> float:
        worst = 1.0
        for d in gpus:
            others = list(self.res[d])
            others.remove(t)
            own = 1.0
            for r in others:
                own *= self.speed[int(self.p.gpu_kind[d])][t][r]
            worst = min(worst, own)
        return worst


def place_reference(p: Problem, params: PackParams) -> Placement:
    cluster = _Cluster(p, params)
    offsets = p.job_offsets()
    n = p.n_jobs
    node, reason, detail = [-1] * n, [0] * n, [0] * n
    gpus = [-1] * int(offsets[-1])
    failed = 0
    for j in range(n):
        if 0 <= params.lookahead < failed:
            reason[j] = R_LOOKAHEAD
            continue
        t, g, ex = int(p.job_cls[j]), int(p.job_gpus[j]), bool(p.job_excl[j])
        found = _best_node(cluster, t, g, ex)
        if isinstance(found, tuple):
            node[j], chosen = found
            gpus[offsets[j] : offsets[j] + g] = chosen
            for d in chosen:
                cluster.res[d].append(t)
                cluster.excl[d] = cluster.excl[d] or ex
            continue
        failed += 1
        reason[j], detail[j] = found, 0
        if p.n_gpus == 0:
            reason[j] = R_NO_GPUS
        elif g > 1 and (largest := _largest_set(cluster, t, ex)) > 0:
            reason[j], detail[j] = R_GANG, largest
    speed = [
        cluster.final_speed(int(p.job_cls[j]), gpus[offsets[j] : offsets[j + 1]]) if node[j] >= 0 else 0.0
        for j in range(n)
    ]
    return _result(node, gpus, offsets, speed, reason, detail)


def _node_candidates(cluster: _Cluster, node: int, t: int, ex: bool) -> list[tuple[float, int]]:
    p = cluster.p
    out = []
    for d in range(int(p.node_start[node]), int(p.node_start[node + 1])):
        stage, cost = cluster.evaluate(d, t, ex)
        if stage == ST_OK:
            out.append((cost, d))
    return sorted(out)


def _best_node(cluster: _Cluster, t: int, g: int, ex: bool) -> tuple[int, list[int]] | int:
    """(node, GPUs sorted) of the cheapest node, or the highest stage any GPU reached."""
    best: tuple[float, int, list[int]] | None = None
    for node in range(len(cluster.p.node_start) - 1):
        cands = _node_candidates(cluster, node, t, ex)
        if len(cands) < g:
            continue
        total = 0.0
        for cost, _ in cands[:g]:
            total += cost
        if best is None or total < best[0]:
            best = (total, node, sorted(d for _, d in cands[:g]))
    if best is not None:
        return best[1], best[2]
    return max((cluster.evaluate(d, t, ex)[0] for d in range(cluster.p.n_gpus)), default=0)


def _largest_set(cluster: _Cluster, t: int, ex: bool) -> int:
    return max(len(_node_candidates(cluster, n, t, ex)) for n in range(len(cluster.p.node_start) - 1))


def _result(
    node: list[int], gpus: list[int], offsets: I64, speed: list[float], reason: list[int], detail: list[int]
) -> Placement:
    return Placement(
        node=np.array(node, np.int32),
        gpus=np.array(gpus, np.int32),
        offsets=np.asarray(offsets, np.int64),
        speed=np.array(speed, np.float64),
        reason=np.array(reason, np.int32),
        detail=np.array(detail, np.int32),
    )


__all__ = ["place_reference"]
