"""The measured throughput table (Gavel's ``simulation_throughputs.json``), parsed once.

Layout of the JSON: ``{gpu_type: {"('<job type>', <gpus>)": {"null": solo steps/s,
"('<other>', 1)": [this job's steps/s, other's steps/s]}}}``. Pairs were measured for 1-GPU
jobs only, on one GPU shared by the two jobs; ``[0, 0]`` means the pair did not fit in memory.
We keep solo throughputs for every GPU type and GPU count, and for the consolidated GPU types
(k80, p100, v100) the pairs as *normalised* speeds (pair steps/s divided by solo steps/s).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

# Memory (MiB, as NVML reports it) of the GPUs the table was measured on: decides where its
# "[0, 0] = does not fit" entries apply.
TABLE_GPU_MEMORY_MIB: Mapping[str, int] = {"k80": 11441, "p100": 16280, "v100": 16160}

# GPU type whose pair data stands in for GPU types the table has not measured.
FALLBACK_GPU_TYPE = "v100"

INFEASIBLE: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class ThroughputTable:
    solo: Mapping[tuple[str, str, int], float]  # (gpu_type, job_type, gpus) -> steps/s alone
    pairs: Mapping[tuple[str, str, str], tuple[float, float]]  # (gpu_type, a, b) -> (speed a, speed b)
    job_types: tuple[str, ...]  # 1-GPU job types, in the file's order
    pair_gpu_types: tuple[str, ...]  # GPU types with pair measurements

    def pair_type_for(self, gpu_type: str) -> str:
        """The GPU type whose pair data to use for ``gpu_type``."""
        return gpu_type if gpu_type in self.pair_gpu_types else FALLBACK_GPU_TYPE


def _key(text: str) -> tuple[str, int]:
    job_type, gpus = ast.literal_eval(text)
    return str(job_type), int(gpus)


def parse_table(raw: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> ThroughputTable:
    solo: dict[tuple[str, str, int], float] = {}
    pairs: dict[tuple[str, str, str], tuple[float, float]] = {}
    job_types: list[str] = []
    pair_types = [t for t in raw if "_" not in t]
    for gpu_type, entries in raw.items():
        for key, row in entries.items():
            job_type, gpus = _key(key)
            solo_rate = float(row["null"])
            solo[(gpu_type, job_type, gpus)] = solo_rate
            if gpus != 1 or gpu_type not in pair_types:
                continue
            if job_type not in job_types:
                job_types.append(job_type)
            for other_key, value in row.items():
                if other_key == "null":
                    continue
                other, other_gpus = _key(other_key)
                if other_gpus == 1:
                    pairs[(gpu_type, job_type, other)] = _normalise(value, solo_rate, entries, other)
    return ThroughputTable(solo, pairs, tuple(job_types), tuple(pair_types))


def _normalise(
    value: list[float], solo_rate: float, entries: Mapping[str, Mapping[str, Any]], other: str
) -> tuple[float, float]:
    mine, theirs = float(value[0]), float(value[1])
    if mine <= 0.0 or theirs <= 0.0:
        return INFEASIBLE
    other_solo = float(entries[repr((other, 1))]["null"])
    return min(1.0, mine / solo_rate), min(1.0, theirs / other_solo)


@lru_cache(maxsize=1)
def packaged_table() -> ThroughputTable:
    """The table shipped in ``horus_core/data`` (parsed once per process; it is immutable)."""
    text = resources.files("horus_core.data").joinpath("simulation_throughputs.json").read_text()
    return parse_table(json.loads(text))
