"""Rows <-> model objects. Specs are stored as JSON with the model's field names.

A stored row that cannot be decoded (unreadable JSON, a non-finite number, an unknown state) never
stops the reads of the others: SQL only embeds the stored JSON as text (it parses nothing), and
Python decodes each row alone; a bad row reads back as FAILED with the reason (see
:func:`unreadable_row` and docs/reliability.md, "Input validation and the store").

Many-row reads come back from SQLite as ONE JSON document (``json_group_array``): the Python
sqlite3 module releases and re-takes the GIL around every row it steps through, and a thread
that must re-take the GIL from a busy event loop waits up to the switch interval each time
(10,000 rows: seconds instead of milliseconds). One row, one hand-over.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from horus_core.caps import alone
from horus_core.errors import InvalidArgument
from horus_core.evolve import evolve
from horus_core.model import Gpu, Job, JobSpec, JobState, ProfileHints
from horus_core.modelcard import ModelCard, card_from_dict, card_to_dict

JOB_JSON = (
    "json_object('id', id, 'request_id', request_id, 'owner', owner, 'spec', CAST(spec AS TEXT),"
    " 'state', state, 'attempt', attempt, 'submitted_at', submitted_at, 'updated_at', updated_at,"
    " 'started_at', started_at, 'finished_at', finished_at, 'node', node, 'gpus', CAST(gpus AS TEXT),"
    " 'reason', reason, 'exit_code', exit_code, 'predicted_slowdown', predicted_slowdown,"
    " 'cancel_requested', cancel_requested, 'seq', seq,"
    " 'version', version, 'reason_code', reason_code,"
    " 'nodes', CAST(nodes AS TEXT), 'parts', CAST(parts AS TEXT),"
    " 'gpu_memory_cap_mib', gpu_memory_cap_mib, 'gpu_memory_peak_mib', gpu_memory_peak_mib,"
    " 'contained_mib', contained_mib)"
)


# The keys of each job's JSON document, in the order above (PostgreSQL's rows carry them as columns).
JOB_KEYS = tuple(re.findall(r"'(\w+)', ", JOB_JSON))


# The same without the spec: for a caller that already knows the jobs' specs (a spec never changes
# once stored), which is most of what decoding a row costs.
JOB_JSON_NO_SPEC = JOB_JSON.replace("'spec', CAST(spec AS TEXT),", "")


def select_jobs(where: str, *, spec: bool = True) -> str:
    """One row, one column: a JSON array of the jobs matching ``where`` (which may order/limit);
    ``spec=False``: without their specs (see :func:`job_rows_from_json`)."""
    return (
        f"SELECT json_group_array({JOB_JSON if spec else JOB_JSON_NO_SPEC}) FROM (SELECT * FROM jobs {where})"
    )


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as stored: the model object plus what only the master needs to know.

    ``unreadable``: why the stored row could not be decoded ("" for a good row); such a row reads
    back as a FAILED job with a placeholder spec (see :func:`unreadable_row`).
    """

    job: Job
    cancel_requested: bool = False
    request_id: str | None = None
    seq: int = 0
    unreadable: str = ""
    # A multi-node gang attempt: each part's state in ``job.nodes`` order (horus_core.gang.Part
    # values); empty for an attempt on one node.
    parts: tuple[str, ...] = ()


UNREADABLE_COMMAND = "<unreadable stored spec>"
# What decoding a bad row may raise (anything else is a bug and propagates).
DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)


def _as_read(x: float) -> float:
    return float(f"{x:.15g}")


def as_stored(job: Job, version: int | None = None) -> Job:
    """``job`` as a read gives it back: SQLite's JSON writes a REAL with 15 significant digits,
    so times and the predicted slowdown are rounded to that before they are written (the live
    index then holds exactly what the database reads). ``version``: a new one (else kept)."""
    started, finished = job.started_at, job.finished_at
    return evolve(
        job,
        version=job.version if version is None else version,
        submitted_at=_as_read(job.submitted_at),
        updated_at=_as_read(job.updated_at),
        started_at=None if started is None else _as_read(started),
        finished_at=None if finished is None else _as_read(finished),
        predicted_slowdown=_as_read(job.predicted_slowdown),
    )


def spec_to_json(spec: JobSpec) -> str:
    h = spec.hints
    doc: dict[str, Any] = {
        "command": list(spec.command),
        "gpus": spec.gpus,
        "name": spec.name,
        "owner": spec.owner,
        "job_type": spec.job_type,
        "image": spec.image,
        "env": [[k, v] for k, v in spec.env],
        "workdir": spec.workdir,
        "exclusive": spec.exclusive,
        "priority": spec.priority,
        "hints": {"util_avg": h.util_avg, "util_peak": h.util_peak, "mem_mib": h.mem_mib},
        "cpus": spec.cpus,
        "memory_mib": spec.memory_mib,
        "mounts": list(spec.mounts),
        "total_steps": spec.total_steps,
        "min_speed": spec.min_speed,
        "gpu_types": list(spec.gpu_types),
        "gpus_min": spec.gpus_min,
        "gpus_max": spec.gpus_max,
        "queue": spec.queue,
        "priority_class": spec.priority_class,
        "grace_s": spec.grace_s,
        "gpus_per_node": spec.gpus_per_node,
        "nodes": spec.nodes,
        "gpu_memory_mib": spec.gpu_memory_mib,
    }
    if spec.model_card is not None:
        doc["model_card"] = card_to_dict(spec.model_card)
    return json.dumps(doc, separators=(",", ":"), allow_nan=False)  # SQLite's JSON has no NaN


def _finite(value: Any) -> float:
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"non-finite number {value!r}")
    return out


def _opt_finite(value: Any) -> float | None:
    return None if value is None else _finite(value)


def _strings(values: Any) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError("expected a list of strings")
    return tuple(values)


def spec_from_dict(d: dict[str, Any]) -> JobSpec:
    """The spec of a stored document; raises one of :data:`DECODE_ERRORS` if it is malformed."""
    h = d.get("hints") or {}
    mem = h.get("mem_mib")
    return JobSpec(
        command=_strings(d["command"]),
        gpus=int(d.get("gpus", 1)),
        name=str(d.get("name", "")),
        owner=str(d.get("owner", "")),
        job_type=str(d.get("job_type", "")),
        image=str(d.get("image", "")),
        env=tuple((str(k), str(v)) for k, v in d.get("env", [])),
        workdir=str(d.get("workdir", "")),
        exclusive=bool(d.get("exclusive", False)),
        priority=int(d.get("priority", 0)),
        hints=ProfileHints(
            _opt_finite(h.get("util_avg")), _opt_finite(h.get("util_peak")), None if mem is None else int(mem)
        ),
        cpus=_finite(d.get("cpus", 0.0)),
        memory_mib=int(d.get("memory_mib", 0)),
        mounts=_strings(d.get("mounts", [])),
        total_steps=int(d.get("total_steps", 0)),
        gpus_min=int(d.get("gpus_min", 0)),
        gpus_max=int(d.get("gpus_max", 0)),
        min_speed=_finite(d.get("min_speed", 0.0)),  # rows written before the field: the default
        gpu_types=_strings(d.get("gpu_types", [])),
        queue=str(d.get("queue", "")),
        priority_class=str(d.get("priority_class", "")),
        grace_s=_finite(d.get("grace_s", 0.0)),
        gpus_per_node=int(d.get("gpus_per_node", 0)),
        nodes=int(d.get("nodes", 0)),
        model_card=_card(d.get("model_card")),
        gpu_memory_mib=int(d.get("gpu_memory_mib", 0)),
    )


def _card(raw: Any) -> ModelCard | None:
    if raw is None:
        return None
    try:
        return card_from_dict(raw)
    except InvalidArgument as exc:
        raise ValueError(str(exc)) from None


def _loaded(value: Any) -> Any:
    """A JSON column: text from :data:`JOB_JSON` / the live read, or an already decoded value."""
    return json.loads(value) if isinstance(value, str) else value


def job_row_from_dict(d: dict[str, Any], spec: JobSpec | None = None) -> JobRow:
    """``spec``: the job's spec when already decoded (``d["spec"]`` is then not read). A job
    contained after going over its GPU memory reads with the spec it runs with now
    (:func:`horus_core.caps.alone`; the stored spec stays the one submitted)."""
    contained = int(d.get("contained_mib") or 0)
    spec = spec if spec is not None else spec_from_dict(_loaded(d["spec"]))
    job = Job(
        id=d["id"],
        spec=alone(spec, contained) if contained > 0 else spec,
        state=JobState(d["state"]),
        attempt=int(d["attempt"]),
        submitted_at=_finite(d["submitted_at"]),
        updated_at=_finite(d["updated_at"]),
        started_at=_opt_finite(d["started_at"]),
        finished_at=_opt_finite(d["finished_at"]),
        node=d["node"],
        gpus=_strings(_loaded(d["gpus"])),
        reason=d["reason"],
        exit_code=d["exit_code"],
        predicted_slowdown=_finite(d["predicted_slowdown"]),
        version=int(d["version"]),
        reason_code=str(d.get("reason_code") or ""),
        nodes=_strings(_loaded(d.get("nodes") or "[]")),
        gpu_memory_cap_mib=int(d.get("gpu_memory_cap_mib") or 0),
        gpu_memory_peak_mib=int(d.get("gpu_memory_peak_mib") or 0),
        contained_mib=contained,
    )
    parts = _strings(_loaded(d.get("parts") or "[]"))
    return JobRow(job, bool(d["cancel_requested"]), d["request_id"], d["seq"], parts=parts)


def _number(value: Any, default: float = 0.0) -> float:
    try:
        return _finite(value)
    except DECODE_ERRORS:
        return default


def unreadable_row(d: dict[str, Any], why: str) -> JobRow:
    """What a row that cannot be decoded reads back as: FAILED, with the reason and a placeholder
    spec that keeps its owner (so access checks still apply)."""
    owner = d.get("owner")
    spec = JobSpec(command=(UNREADABLE_COMMAND,), owner=owner if isinstance(owner, str) else "")
    at = _number(d.get("updated_at"))
    job = Job(
        id=str(d.get("id", "")),
        spec=spec,
        state=JobState.FAILED,
        attempt=int(_number(d.get("attempt"))),
        submitted_at=_number(d.get("submitted_at")),
        updated_at=at,
        finished_at=at,
        reason=f"stored row unreadable: {why}"[:1000],
    )
    request_id = d.get("request_id")
    rid = request_id if isinstance(request_id, str) else None
    return JobRow(job, False, rid, int(_number(d.get("seq"))), unreadable=why[:500])


def decode_row(d: dict[str, Any], spec: JobSpec | None = None) -> JobRow:
    try:
        return job_row_from_dict(d, spec)
    except DECODE_ERRORS as exc:
        return unreadable_row(d, f"{type(exc).__name__}: {exc}")


def job_rows_from_json(text: str | None, specs: Mapping[str, JobSpec] | None = None) -> list[JobRow]:
    """Rows from :func:`select_jobs`, in submission order; each row is decoded alone. ``specs``:
    the jobs' specs by id (every one of them, when they were selected without: ``spec=False``)."""
    rows = [decode_row(d, specs[d["id"]] if specs else None) for d in json.loads(text or "[]")]
    rows.sort(key=lambda r: r.seq)
    return rows


JOB_INSERT_COLUMNS = (
    "(id, request_id, owner, spec, state, attempt, submitted_at, updated_at, reason, reason_code)"
)
JOB_INSERT_ARITY = 10


def job_insert_params(job: Job, request_id: str | None) -> tuple[Any, ...]:
    return (
        job.id,
        request_id,
        job.spec.owner,
        spec_to_json(job.spec),
        job.state.value,
        job.attempt,
        job.submitted_at,
        job.updated_at,
        job.reason,
        job.reason_code,
    )


# Mutable columns, in the order of job_columns; written with UPDATE ... FROM (VALUES ...).
JOB_UPDATE_COLUMNS = (
    "state",
    "attempt",
    "updated_at",
    "started_at",
    "finished_at",
    "node",
    "gpus",
    "reason",
    "exit_code",
    "predicted_slowdown",
    "cancel_requested",
    "version",
    "reason_code",
    "nodes",
    "parts",
    "gpu_memory_cap_mib",
    "gpu_memory_peak_mib",
    "contained_mib",
)


def job_columns(row: JobRow) -> tuple[Any, ...]:
    """The job's id, then every mutable column (see :data:`JOB_UPDATE_COLUMNS`) as the model
    holds it: the list columns (:data:`LIST_COLUMNS`) as tuples, not yet JSON."""
    j = row.job
    return (
        j.id,
        j.state.value,
        j.attempt,
        j.updated_at,
        j.started_at,
        j.finished_at,
        j.node,
        j.gpus,
        j.reason,
        j.exit_code,
        j.predicted_slowdown,
        int(row.cancel_requested),
        j.version,
        j.reason_code,
        j.nodes,
        row.parts,
        j.gpu_memory_cap_mib,
        j.gpu_memory_peak_mib,
        j.contained_mib,
    )


LIST_COLUMNS = frozenset({7, 14, 15})  # positions in job_columns of gpus, nodes, parts


def column_param(i: int, value: Any) -> Any:
    """A value of :func:`job_columns` at position ``i`` as the statement binds it."""
    if i not in LIST_COLUMNS:
        return value
    return json.dumps(list(value)) if value else "[]"  # (most jobs run on one node: no parts)


def gpus_to_json(gpus: tuple[Gpu, ...]) -> str:
    return json.dumps(
        [
            {
                "uuid": g.uuid,
                "index": g.index,
                "model": g.model,
                "memory_mib": g.memory_mib,
                "gpu_type": g.gpu_type,
                "healthy": g.healthy,
                **(
                    {"compute_fraction": g.compute_fraction, "parent_uuid": g.parent_uuid}
                    if g.parent_uuid
                    else {}
                ),
            }
            for g in gpus
        ],
        separators=(",", ":"),
    )


def _mig_fields(g: Gpu) -> dict[str, Any]:
    """A MIG instance's compute share and physical GPU (none for a whole GPU)."""
    return {"compute_fraction": g.compute_fraction, "parent_uuid": g.parent_uuid} if g.parent_uuid else {}


def gpus_from_json(text: str, node: str) -> tuple[Gpu, ...]:
    return tuple(
        Gpu(
            uuid=d["uuid"],
            node=node,
            index=int(d.get("index", 0)),
            model=d.get("model", ""),
            memory_mib=int(d.get("memory_mib", 0)),
            gpu_type=d.get("gpu_type", ""),
            healthy=bool(d.get("healthy", True)),
            compute_fraction=float(d.get("compute_fraction", 1.0)),
            parent_uuid=str(d.get("parent_uuid", "")),
        )
        for d in json.loads(text)
    )
