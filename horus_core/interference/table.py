"""The measured throughput table (Gavel's ``simulation_throughputs.json``), parsed once.

Layout of the JSON: ``{gpu_type: {"('<job type>', <gpus>)": {"null": solo steps/s,
"('<other>', 1)": [this job's steps/s, other's steps/s]}}}``. Pairs were measured for 1-GPU
jobs only, on one GPU shared by the two jobs; ``[0, 0]`` means the pair did not fit in memory.
We keep solo throughputs for every GPU type and GPU count, and for the consolidated GPU types
(k80, p100, v100) the pairs as *normalised* speeds (pair steps/s divided by solo steps/s).

A table of one's own (``--throughputs FILE``, :func:`load_table`) is checked entry by entry: a
solo throughput of 0 means the job cannot run on that GPU type (its pairs there count as not
fitting); NaN, infinite or negative numbers, keys that are not ``('<job type>', <gpus>)``, pairs
that are not two numbers, a partner without a solo entry, and malformed JSON are refused with an
error naming the entry (:class:`~horus_core.errors.InvalidArgument`).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from horus_core.errors import InvalidArgument

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
    """The table of a parsed JSON document (trusted: the packaged file; see :func:`check_raw`)."""
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
    other_solo = float(entries[repr((other, 1))]["null"])
    if mine <= 0.0 or theirs <= 0.0 or solo_rate <= 0.0 or other_solo <= 0.0:
        return INFEASIBLE  # out of memory, or one of them cannot run on this GPU type at all
    return min(1.0, mine / solo_rate), min(1.0, theirs / other_solo)


MAX_TABLE_BYTES = 64 * 1024 * 1024


def load_table(path: str | Path) -> ThroughputTable:
    """A measured table in Gavel's format from a file, every entry checked (see the module doc)."""
    file = Path(path)
    try:
        if file.stat().st_size > MAX_TABLE_BYTES:
            raise InvalidArgument("throughputs", f"{file} is larger than {MAX_TABLE_BYTES} bytes")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument("throughputs", f"cannot read {file}: {exc}") from None
    return parse_table_text(text)


def parse_table_text(text: str) -> ThroughputTable:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument("throughputs", f"not valid JSON: {exc}") from None
    check_raw(raw)
    table = parse_table(raw)
    if not table.solo:
        raise InvalidArgument("throughputs", "holds no job at all")
    return table


def check_raw(raw: object) -> None:
    """Every entry of an untrusted table, or InvalidArgument naming the first bad one."""
    if not isinstance(raw, dict) or not raw:
        raise InvalidArgument("throughputs", "expected a JSON object of GPU type -> entries")
    for gpu_type, entries in raw.items():
        where = f"throughputs[{gpu_type[:40]!r}]"
        if not isinstance(entries, dict):
            raise InvalidArgument(where, "expected an object of \"('<job type>', <gpus>)\" -> entry")
        for key, row in entries.items():
            here = f"{where}[{key[:80]!r}]"
            _check_key(here, key)
            if not isinstance(row, dict) or "null" not in row:
                raise InvalidArgument(here, 'expected an object with "null" (the solo throughput)')
            _check_number(f"{here}['null']", row["null"])
            for other, value in row.items():
                if other == "null":
                    continue
                there = f"{here}[{other[:80]!r}]"
                name, gpus = _check_key(there, other)
                if not isinstance(value, list) or len(value) != 2:
                    raise InvalidArgument(there, "expected [this job's steps/s, the other's steps/s]")
                for v in value:
                    _check_number(there, v)
                if gpus == 1 and repr((name, 1)) not in entries:
                    raise InvalidArgument(there, f"the partner has no solo entry on {gpu_type!r}")


def _check_key(where: str, key: str) -> tuple[str, int]:
    try:
        name, gpus = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InvalidArgument(where, 'unknown key: expected "(\'<job type>\', <gpus>)" or "null"') from None
    if (
        not isinstance(name, str)
        or not name
        or isinstance(gpus, bool)
        or not isinstance(gpus, int)
        or gpus < 1
    ):
        raise InvalidArgument(where, "expected a job type and a GPU count of at least 1")
    return name, gpus


def _check_number(where: str, value: object) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) < 0.0:  # type: ignore[arg-type]
        raise InvalidArgument(where, f"must be a finite number >= 0 (0: cannot run), got {value!r}")


@lru_cache(maxsize=1)
def packaged_table() -> ThroughputTable:
    """The table shipped in ``horus_core/data`` (parsed once per process; it is immutable)."""
    text = resources.files("horus_core.data").joinpath("simulation_throughputs.json").read_text()
    return parse_table(json.loads(text))
