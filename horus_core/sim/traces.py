"""Job arrival traces: Gavel's two tab-separated formats and a plain CSV format of our own.

- ``gavel`` (10 columns, ``physical_*.trace`` and the ``*_cap`` traces): job_type, command,
  working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor (GPUs),
  priority_weight, SLO (-1 = none), arrival_time (s).
- ``gavel-msr`` (7 columns, ``msr_seed0_*.trace``): job_type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival_time (s), scale_factor (GPUs).
- ``csv`` (``*.csv``, documented in docs/simulator.md): a header
  ``job_type,gpus,total_steps,arrival_s[,priority][,duration_s]`` then one job per line.

Only the fields the simulator uses are kept. A malformed line raises
:class:`~horus_core.errors.InvalidArgument` naming the file and line.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from horus_core.errors import InvalidArgument

FORMATS = ("gavel", "gavel-msr", "csv")
CSV_REQUIRED = ("job_type", "gpus", "total_steps", "arrival_s")
CSV_OPTIONAL = ("priority", "duration_s")
MAX_GPUS_PER_TRACE_JOB = 4096


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_type: str
    gpus: int
    total_steps: int
    arrival_s: float
    priority: int = 0
    # Known solo run time, used only when the throughput table has no entry for the job.
    duration_s: float | None = None
    priority_weight: float = 1.0  # Gavel's weight, kept for reference; policies see ``priority``
    slo_s: float | None = None
    # Who submitted it and to which queue (issue 13): set by a team rule (horus_core.sim.teams).
    owner: str = ""
    queue: str = ""
    # What a user may also ask for at submission: the GPU types the job accepts (empty: any),
    # GPUs of its own, and a priority class (docs/queues.md). Set by code, not read from files.
    gpu_types: tuple[str, ...] = ()
    exclusive: bool = False
    priority_class: str = ""


def load_trace(path: str | Path, fmt: str | None = None) -> list[TraceJob]:
    """Read a trace file; ``fmt`` is one of :data:`FORMATS` (None: guess from name and columns)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument("trace", f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_trace(text, fmt or guess_format(path.name, text), source=str(path))


def as_batch(jobs: Sequence[TraceJob], n: int) -> list[TraceJob]:
    """The first ``n`` jobs of a trace, all arriving at time 0 (a batch submitted at once, as
    ``horus-sim --batch``); ``n`` must be within 1 and the trace's length."""
    if not 1 <= n <= len(jobs):
        raise InvalidArgument("batch", f"must be within 1 and the trace's {len(jobs)} jobs, got {n}")
    return [replace(job, arrival_s=0.0) for job in jobs[:n]]


def guess_format(name: str, text: str) -> str:
    if name.endswith(".csv"):
        return "csv"
    first = next((line for line in text.splitlines() if line.strip()), "")
    columns = len(first.split("\t"))
    if columns == 10:
        return "gavel"
    if columns == 7:
        return "gavel-msr"
    raise InvalidArgument(
        "trace", f"{name}:1: cannot tell the format: {columns} tab-separated column(s), expected 10 or 7"
    )


def parse_trace(text: str, fmt: str, source: str = "<trace>") -> list[TraceJob]:
    if fmt == "csv":
        return _parse_csv(text, source)
    parsers: dict[str, Callable[[list[str]], TraceJob]] = {"gavel": _gavel10, "gavel-msr": _gavel7}
    if fmt not in parsers:
        raise InvalidArgument("trace", f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    width = 10 if fmt == "gavel" else 7
    jobs: list[TraceJob] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.rstrip("\r\n").split("\t")
        if len(cols) != width:
            raise _line_error(source, lineno, f"expected {width} tab-separated columns, got {len(cols)}")
        jobs.append(_checked(parsers[fmt], cols, source, lineno))
    return jobs


def _checked(parse: Callable[[list[str]], TraceJob], cols: list[str], source: str, lineno: int) -> TraceJob:
    try:
        return _validate(parse(cols))
    except ValueError as exc:
        raise _line_error(source, lineno, str(exc)) from None


def _line_error(source: str, lineno: int, message: str) -> InvalidArgument:
    return InvalidArgument("trace", f"{source}:{lineno}: {message}")


def _gavel10(c: list[str]) -> TraceJob:
    slo = _float("SLO", c[8])
    return TraceJob(
        job_type=_text("job_type", c[0]),
        gpus=_int("scale_factor", c[6]),
        total_steps=_int("total_steps", c[5]),
        arrival_s=_float("arrival_time", c[9]),
        priority_weight=_float("priority_weight", c[7]),
        slo_s=None if slo < 0 else slo,
    )


def _gavel7(c: list[str]) -> TraceJob:
    return TraceJob(
        job_type=_text("job_type", c[0]),
        gpus=_int("scale_factor", c[6]),
        total_steps=_int("total_steps", c[4]),
        arrival_s=_float("arrival_time", c[5]),
    )


def _parse_csv(text: str, source: str) -> list[TraceJob]:
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and line[0] != "#"]
    if not rows:
        raise InvalidArgument("trace", f"{source}: empty CSV trace (needs a header line)")
    header_no, header_line = rows[0]
    header = [h.strip() for h in next(csv.reader([header_line]))]
    missing = [h for h in CSV_REQUIRED if h not in header]
    unknown = [h for h in header if h not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or unknown or len(set(header)) != len(header):
        raise _line_error(
            source,
            header_no,
            f"bad header {header_line!r}; expected {','.join(CSV_REQUIRED)}[,{'][,'.join(CSV_OPTIONAL)}]",
        )
    jobs = []
    for lineno, line in rows[1:]:
        cells = [c.strip() for c in next(csv.reader(io.StringIO(line)))]
        if len(cells) != len(header):
            raise _line_error(
                source, lineno, f"expected {len(header)} comma-separated values, got {len(cells)}"
            )
        jobs.append(_checked(lambda cs: _csv_job(dict(zip(header, cs, strict=True))), cells, source, lineno))
    return jobs


def _csv_job(row: dict[str, str]) -> TraceJob:
    duration = row.get("duration_s", "")
    return TraceJob(
        job_type=_text("job_type", row["job_type"]),
        gpus=_int("gpus", row["gpus"]),
        total_steps=_int("total_steps", row["total_steps"]),
        arrival_s=_float("arrival_s", row["arrival_s"]),
        priority=_int("priority", row.get("priority") or "0"),
        duration_s=_float("duration_s", duration) if duration else None,
    )


def _validate(job: TraceJob) -> TraceJob:
    if not 1 <= job.gpus <= MAX_GPUS_PER_TRACE_JOB:
        raise ValueError(f"GPU count must be 1..{MAX_GPUS_PER_TRACE_JOB}, got {job.gpus}")
    if job.total_steps < 1:
        raise ValueError(f"total_steps must be positive, got {job.total_steps}")
    if job.arrival_s < 0:
        raise ValueError(f"arrival time must not be negative, got {job.arrival_s}")
    if job.duration_s is not None and job.duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {job.duration_s}")
    return job


def _text(name: str, value: str) -> str:
    if not value.strip():
        raise ValueError(f"{name} is empty")
    return value.strip()


def _int(name: str, value: str) -> int:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"{name}: expected a whole number, got {value!r}")
    return int(number)


def _float(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return number


def format_csv(jobs: Iterable[TraceJob]) -> str:
    """Write jobs in the CSV trace format (with the optional columns)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((*CSV_REQUIRED, *CSV_OPTIONAL))
    for j in jobs:
        duration = "" if j.duration_s is None else repr(j.duration_s)
        writer.writerow((j.job_type, j.gpus, j.total_steps, repr(j.arrival_s), j.priority, duration))
    return out.getvalue()
