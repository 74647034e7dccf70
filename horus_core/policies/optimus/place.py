"""Where Optimus's GPU counts go: whole jobs on the fewest nodes, exclusive GPUs first, and a
waiting job may share GPUs with one resident each where the interference model's pair speeds
say the two finish more work together than apart (``horus``'s gain rule, docs/placement.md section 2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from horus_core.model import Gpu, Job

MIN_SPEED = 0.3  # nobody on a shared GPU below this normalised speed
MIN_GAIN = 0.15  # a shared GPU's summed speeds must reach 1 + this

# Pair speeds of (resident, newcomer) on one GPU: (resident's speed, newcomer's speed).
PairSpeeds = Callable[[Job, Job, Gpu], tuple[float, float]]


@dataclass(frozen=True, slots=True)
class Placed:
    job: Job
    node: str
    gpus: tuple[Gpu, ...]


def best_fit(free: dict[str, list[Gpu]], want: int, lo: int) -> tuple[str, int] | None:
    """The node for a job of ``want`` GPUs: the one with the fewest free GPUs that still holds it
    (one node, best fit); else the freest node if it holds at least ``lo``; else None."""
    return _Buckets(free).best_fit(want, lo)


class _Buckets:
    """Node names by their number of free GPUs, for best fit without scanning every node."""

    def __init__(self, free: dict[str, list[Gpu]]) -> None:
        self.top = max((len(g) for g in free.values()), default=0)
        self.by_count: list[set[str]] = [set() for _ in range(self.top + 1)]
        for name, gpus in free.items():
            self.by_count[len(gpus)].add(name)

    def best_fit(self, want: int, lo: int) -> tuple[str, int] | None:
        for count in range(max(want, 1), self.top + 1):
            if self.by_count[count]:
                return min(self.by_count[count]), want
        for count in range(min(want, self.top + 1) - 1, max(lo, 1) - 1, -1):
            if self.by_count[count]:
                return min(self.by_count[count]), count
        return None

    def move(self, name: str, before: int, after: int) -> None:
        self.by_count[before].discard(name)
        self.by_count[after].add(name)


def place_exclusive(
    wants: Sequence[tuple[Job, int, int]], free: dict[str, list[Gpu]]
) -> tuple[list[Placed], list[Job]]:
    """Place (job, count, minimum) in order on free GPUs, taking them from ``free``; the jobs
    that did not fit even at their minimum come back second."""
    placed: list[Placed] = []
    left: list[Job] = []
    buckets = _Buckets(free)
    for job, want, lo in wants:
        spot = buckets.best_fit(want, lo)
        if spot is None:
            left.append(job)
            continue
        node, count = spot
        gpus, free[node] = free[node][:count], free[node][count:]
        buckets.move(node, count + len(free[node]), len(free[node]))
        placed.append(Placed(job, node, tuple(gpus)))
    return placed, left


def place_shared(
    job: Job, count: int, alone: dict[str, list[tuple[Gpu, Job]]], speeds: PairSpeeds
) -> Placed | None:
    """``count`` GPUs of one node, each holding one resident, where the pair gains enough; the
    node whose chosen GPUs have the highest summed speed wins. Taken GPUs leave ``alone``."""
    best: tuple[float, str, list[int]] | None = None
    for node, gpus in alone.items():
        scored = []
        for i, (gpu, resident) in enumerate(gpus):
            theirs, mine = speeds(resident, job, gpu)
            floors_ok = theirs >= max(MIN_SPEED, resident.spec.min_speed) and mine >= max(
                MIN_SPEED, job.spec.min_speed
            )
            if floors_ok and theirs + mine >= 1.0 + MIN_GAIN:
                scored.append((theirs + mine, i))
        if len(scored) >= count:
            top = sorted(scored, reverse=True)[:count]
            total = sum(s for s, _ in top)
            if best is None or total > best[0]:
                best = (total, node, [i for _, i in top])
    if best is None:
        return None
    _, node, picks = best
    chosen = tuple(alone[node][i][0] for i in sorted(picks))
    alone[node] = [p for i, p in enumerate(alone[node]) if i not in set(picks)]
    return Placed(job, node, chosen)


def feasible_resizes(
    running: dict[str, tuple[str, int]], wants: dict[str, int], free: dict[str, int]
) -> dict[str, int]:
    """The resizes worth a restart: job id -> new count, from ``running`` (job -> (node, count)),
    the planned ``wants`` and the free GPUs per node: every shrink, and the grows (biggest first)
    that one node will hold once the shrinks are done."""
    pool = dict(free)
    out: dict[str, int] = {}
    for job_id, want in wants.items():
        node, count = running[job_id]
        if want < count:
            out[job_id] = want
            pool[node] = pool.get(node, 0) + count - want
    grows = sorted((w, j) for j, w in wants.items() if w > running[j][1])
    for want, job_id in reversed(grows):
        node, count = running[job_id]
        pool[node] = pool.get(node, 0) + count
        fits = [(n, name) for name, n in pool.items() if n >= want]
        best = min(fits) if fits else max((n, name) for name, n in pool.items())
        got = min(want, best[0])
        if got <= count:
            pool[node] -= count  # stays where it is
            continue
        out[job_id] = got
        pool[best[1]] -= got
    return out
