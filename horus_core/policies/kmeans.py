"""A small weighted k-means (k-means++ seeding, Lloyd iterations) with a fixed seed."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float64]
Labels = NDArray[np.int64]


def kmeans(
    points: Matrix, weights: Matrix, k: int, *, seed: int = 0, iters: int = 50
) -> tuple[Labels, float]:
    """Cluster ``points`` (n x d, weighted) into at most k groups: (labels, weighted inertia)."""
    k = max(1, min(k, len(points)))
    centres = _seed(points, weights, k, np.random.default_rng(seed))
    labels: Labels = np.zeros(len(points), np.int64)
    for step in range(iters):
        dist = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        new = dist.argmin(axis=1)
        if step > 0 and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            member = labels == c
            if member.any():
                centres[c] = np.average(points[member], axis=0, weights=weights[member])
    dist = ((points - centres[labels]) ** 2).sum(axis=1)
    return labels, float((dist * weights).sum())


def _seed(points: Matrix, weights: Matrix, k: int, rng: np.random.Generator) -> Matrix:
    """k-means++: each new centre drawn with probability ~ weight x squared distance."""
    first = int(rng.choice(len(points), p=weights / weights.sum()))
    centres = [points[first]]
    for _ in range(1, k):
        d2 = np.min([((points - c) ** 2).sum(axis=1) for c in centres], axis=0) * weights
        if d2.sum() <= 0.0:
            break
        centres.append(points[int(rng.choice(len(points), p=d2 / d2.sum()))])
    while len(centres) < k:
        centres.append(centres[-1])
    out: Matrix = np.array(centres, dtype=np.float64)
    return out


def choose_k(points: Matrix, weights: Matrix, *, low: int = 3, high: int = 5, seed: int = 0) -> Labels:
    """Labels for the smallest k in [low, high] after which one more group no longer cuts the
    inertia by a fifth (an elbow); fewer groups when there are fewer distinct points."""
    distinct = len(np.unique(points, axis=0))
    if distinct <= low:
        return kmeans(points, weights, distinct, seed=seed)[0]
    labels, inertia = kmeans(points, weights, low, seed=seed)
    for k in range(low + 1, min(high, distinct) + 1):
        more, more_inertia = kmeans(points, weights, k, seed=seed)
        if more_inertia > 0.8 * inertia:
            break
        labels, inertia = more, more_inertia
    return labels
