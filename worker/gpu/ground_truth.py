"""Simulated GPUs that disagree with the model: ``horus-worker --fake-gpus 4 --sim-interference FILE``.

The file names pairs of job types whose real speeds when sharing a GPU differ from what the
interference model predicts::

    {"pairs": [{"a": "ResNet-18 (batch size 32)", "b": "Recommendation (batch size 512)",
                "speed_a": 0.25, "speed_b": 0.25, "gpu_type": "v100"}]}

``speed_a`` is a's normalised speed next to b (1.0 = as fast as alone), in (0, 1]; ``gpu_type``
is optional (default: every GPU type). A simulated worker then slows its jobs by these speeds
(``$HORUS_SPEED_FILE``) instead of the model's, so the master has something to learn: the
progress the jobs report shows the real slowdown, not the predicted one.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from horus_core.model import JobSpec
from worker.gpu.base import InterferenceLike, Profile

MAX_PAIRS = 10_000
MAX_NAME = 256
_KEYS = {"a", "b", "speed_a", "speed_b", "gpu_type"}


@dataclass(frozen=True, slots=True)
class PairTruth:
    a: str
    b: str
    speed_a: float
    speed_b: float
    gpu_type: str = ""  # "" = every GPU type


def load_ground_truth(path: pathlib.Path) -> list[PairTruth]:
    """Read and validate the file; ValueError names the file and what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--sim-interference: cannot read {path}: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--sim-interference {path}: not valid JSON: {exc}") from None
    try:
        return parse_ground_truth(doc)
    except ValueError as exc:
        raise ValueError(f"--sim-interference {path}: {exc}") from None


def parse_ground_truth(doc: Any) -> list[PairTruth]:
    if not isinstance(doc, dict) or set(doc) != {"pairs"} or not isinstance(doc["pairs"], list):
        raise ValueError('expected an object {"pairs": [...]} and nothing else')
    entries = doc["pairs"]
    if len(entries) > MAX_PAIRS:
        raise ValueError(f"at most {MAX_PAIRS} pairs, got {len(entries)}")
    out: list[PairTruth] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    for i, entry in enumerate(entries):
        where = f"pairs[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object with a, b, speed_a, speed_b")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_KEYS))})")
        pair = PairTruth(
            _name(entry, "a", where),
            _name(entry, "b", where),
            _speed(entry, "speed_a", where),
            _speed(entry, "speed_b", where),
            _gpu_type(entry, where),
        )
        key = (pair.gpu_type, frozenset((pair.a, pair.b)))
        if key in seen:
            raise ValueError(f"{where}: the pair {pair.a!r} / {pair.b!r} is listed twice")
        seen.add(key)
        out.append(pair)
    return out


def _name(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise ValueError(f"{where}.{key}: expected a job type (1-{MAX_NAME} characters), got {value!r}")
    return value


def _speed(entry: dict[str, Any], key: str, where: str) -> float:
    value = entry.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 < value <= 1.0:
        return float(value)  # (NaN fails the comparison)
    raise ValueError(f"{where}.{key}: expected a number in (0, 1], got {value!r}")


def _gpu_type(entry: dict[str, Any], where: str) -> str:
    value = entry.get("gpu_type", "")
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError(f"{where}.gpu_type: expected a GPU type such as 'v100', got {value!r}")
    return value.strip().lower()


class GroundTruthModel:
    """The simulation's interference model: ``base`` except for the pairs the file names.

    Speeds in a triple are products of pair speeds (as the model computes them); whatever the
    base model says does not fit in memory still does not fit.
    """

    def __init__(self, base: InterferenceLike, pairs: Sequence[PairTruth]) -> None:
        self._base = base
        self._pairs: dict[tuple[str, str, str], tuple[float, float]] = {}
        for p in pairs:
            self._pairs[(p.gpu_type, p.a, p.b)] = (p.speed_a, p.speed_b)
            self._pairs[(p.gpu_type, p.b, p.a)] = (p.speed_b, p.speed_a)

    def enter(self, spec: JobSpec) -> None:
        self._base.enter(spec)

    def profile(self, spec: JobSpec) -> Profile:
        return self._base.profile(spec)

    def signature(self, spec: JobSpec) -> str:
        return self._base.signature(spec)

    def co_speeds(self, signatures: Sequence[str], gpu_type: str) -> tuple[float, ...]:
        base = tuple(self._base.co_speeds(signatures, gpu_type))
        names = list(signatures)  # a signature is the job type it stands for
        if len(signatures) < 2 or all(s == 0.0 for s in base):
            return base
        pairs = list(combinations(range(len(signatures)), 2))
        if not any(self._truth(names[i], names[j], gpu_type) for i, j in pairs):
            return base
        speeds = [1.0] * len(signatures)
        for i, j in pairs:
            truth = self._truth(names[i], names[j], gpu_type)
            s_i, s_j = truth or self._base.co_speeds([signatures[i], signatures[j]], gpu_type)
            speeds[i] *= s_i
            speeds[j] *= s_j
        return tuple(speeds)

    def _truth(self, a: str, b: str, gpu_type: str) -> tuple[float, float] | None:
        return self._pairs.get((gpu_type, a, b)) or self._pairs.get(("", a, b))
