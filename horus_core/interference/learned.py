"""Pair speeds learned from live measurements, and their completion per GPU type.

The completion of one GPU type reads only that type's pairs (the table's and the live ones):
a K80 pair is never predicted from V100 data. GPU types the table lacks use the V100 table
(``ThroughputTable.pair_type_for``) plus their own live pairs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from horus_core.interference.completion import Fit, Priors, choose, complete
from horus_core.interference.table import ThroughputTable

Pair = tuple[float, float]
Choice = tuple[int, Fit]  # (known entries when chosen, the model chosen)
RECHOOSE = 0.1  # choose the model again once the known entries changed by more than this share


class PairObservations:
    """EWMA of measured normalised speeds per (gpu_type, a, b), both orientations."""

    def __init__(self, weight: float) -> None:
        self._weight = weight
        self.speeds: dict[tuple[str, str, str], tuple[float, float]] = {}

    def add(self, gpu_type: str, a: str, b: str, speed_a: float, speed_b: float) -> None:
        old = self.speeds.get((gpu_type, a, b))
        if old is not None:
            w = self._weight
            speed_a, speed_b = old[0] + w * (speed_a - old[0]), old[1] + w * (speed_b - old[1])
        speed_a, speed_b = _unit(speed_a), _unit(speed_b)
        self.speeds[(gpu_type, a, b)] = (speed_a, speed_b)
        self.speeds[(gpu_type, b, a)] = (speed_b, speed_a)

    def get(self, gpu_type: str, a: str, b: str) -> tuple[float, float] | None:
        return self.speeds.get((gpu_type, a, b))


class CompletedPairs:
    """The table's pairs of one GPU type plus the observations, completed to a full matrix.

    Choosing the model (cross-validation) costs about 30 fits; ``previous`` (the choice of the
    completion this one replaces, see :attr:`choice`) is reused while the number of known
    entries stays within 10 % of what it was chosen on, so a new observation costs one fit."""

    def __init__(
        self,
        table: ThroughputTable,
        gpu_type: str,
        observed: Mapping[tuple[str, str, str], Pair],
        previous: Choice | None = None,
        priors: Mapping[str, Pair] | None = None,
    ) -> None:
        pair_type = table.pair_type_for(gpu_type)
        names = list(table.job_types)
        names += sorted({a for (g, a, _b) in observed if g == gpu_type} - set(names))
        self._index = {name: i for i, name in enumerate(names)}
        n = len(names)
        values = np.zeros((n, n))
        known = np.zeros((n, n), dtype=np.bool_)
        self._anchored = False  # whether the table measured pairs of this type (or stands in for it)
        for (g, a, b), speeds in table.pairs.items():
            if g == pair_type and speeds[0] > 0.0:
                self._put(values, known, a, b, speeds[0])
                self._anchored = True
        for (g, a, b), speeds in observed.items():
            if g == gpu_type and speeds[0] > 0.0:
                self._put(values, known, a, b, speeds[0])
        self._known = known
        self._values = values
        self._priors: Priors | None = None
        carded = [name for name in (priors or {}) if name in self._index]
        if priors and carded:  # (a job with a card and a row here: observed on this GPU type)
            rows, cols = np.zeros(n), np.zeros(n)
            for name in carded:
                rows[self._index[name]], cols[self._index[name]] = priors[name]
            self._priors = (rows, cols)
        self._fitted: NDArray[np.float64] | None = None
        self._previous = previous
        self.choice: Choice | None = None  # set once fitted

    def _put(self, values: NDArray[np.float64], known: NDArray[np.bool_], a: str, b: str, v: float) -> None:
        i, j = self._index[a], self._index[b]
        values[i, j] = v
        known[i, j] = True

    def predict(self, a: str, b: str) -> tuple[float, float] | None:
        """(speed a, speed b), or None when either job has no row here (neither a job type of
        the table nor observed on this GPU type nor known by a model card) or nothing at all is
        known on this type. A job with few measured partners gets predictions shrunk towards the
        type's mean, or towards its card's predicted biases (see :mod:`completion`), never a curve
        fitted on another GPU type. Without any table pair for this type (a table of other GPUs,
        or none at all: a cold start) the completion is not used: the pairs observed live are
        the ones a policy chose to co-locate, a sample whose mean says little of the others, and
        the analytic model with the type's learned constants answers instead."""
        i, j = self._index.get(a), self._index.get(b)
        if i is None or j is None or not self._anchored:
            return None
        if self._fitted is None:
            self.choice = self._choose()
            self._fitted = complete(self._values, self._known, fit=self.choice[1], priors=self._priors)
        return float(self._fitted[i, j]), float(self._fitted[j, i])

    def _choose(self) -> Choice:
        count = int(self._known.sum())
        previous = self._previous
        if previous is not None and abs(count - previous[0]) <= RECHOOSE * previous[0]:
            return previous
        return count, choose(self._values, self._known)


def _unit(x: float) -> float:
    return min(1.0, max(0.0, float(x)))
