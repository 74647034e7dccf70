"""The few SQL spellings that differ between SQLite and PostgreSQL, in one place.

Everything else the store says is written once and runs on both: ``?`` placeholders (numbered for
asyncpg by :func:`master.store.pg.to_pg`), ``INSERT ... ON CONFLICT (...) DO UPDATE`` (both accept
it; :func:`upsert` writes it), ``UPDATE ... FROM (VALUES ...)`` (both name the columns
``column1``, ``column2``, ...; PostgreSQL needs the values' types, :func:`update_from_values`).
"""

from __future__ import annotations

from collections.abc import Sequence

from master.store import rows
from master.store.rows import JOB_KEYS

# The PostgreSQL type of each column jobs' UPDATEs write (VALUES rows carry no types there).
PG_TYPES = {
    "id": "text",
    "state": "text",
    "attempt": "int",
    "updated_at": "float8",
    "started_at": "float8",
    "finished_at": "float8",
    "node": "text",
    "gpus": "text",
    "reason": "text",
    "exit_code": "int",
    "predicted_slowdown": "float8",
    "cancel_requested": "int",
    "version": "int",
    "reason_code": "text",
    "nodes": "text",
    "parts": "text",
    "gpu_memory_cap_mib": "int",
    "gpu_memory_peak_mib": "int",
    "contained_mib": "int",
}


def select_jobs(where: str, *, spec: bool = True, pg: bool = False) -> str:
    """One row, one column: a JSON array of the jobs matching ``where`` (which may order/limit);
    ``spec=False``: without their specs (see :func:`master.store.rows.job_rows_from_json`)."""
    if pg:
        keys = [k for k in JOB_KEYS if spec or k != "spec"]
        return (
            f"SELECT COALESCE(json_agg(j), '[]')::text FROM (SELECT {', '.join(keys)} FROM jobs {where}) AS j"
        )
    return rows.select_jobs(where, spec=spec)


def upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """Insert a row of ``columns`` (``?`` each), or update every other column of the row with the
    same ``key`` (what SQLite's INSERT OR REPLACE did, in words both dialects know)."""
    sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}"
    )


def update_from_values(table: str, key: str, columns: Sequence[str], rows: int, *, pg: bool) -> str:
    """One UPDATE of ``rows`` rows of ``table`` (matched on ``key``) setting ``columns``, from
    VALUES rows (key, those columns); PostgreSQL is told each value's type."""
    sets = ", ".join(f"{c} = v.column{k + 2}" for k, c in enumerate(columns))
    if pg:
        row = "(" + ",".join(f"?::{PG_TYPES[c]}" for c in (key, *columns)) + ")"
    else:
        row = "(" + ",".join("?" * (len(columns) + 1)) + ")"
    values = ",".join([row] * rows)
    return f"UPDATE {table} SET {sets} FROM (VALUES {values}) AS v WHERE {table}.{key} = v.column1"


def json_field(column: str, key: str, *, pg: bool, as_int: bool = False) -> str:
    """The value at ``key`` of the JSON text in ``column`` (NULL when absent)."""
    if pg:
        text = f"(({column})::json ->> '{key}')"
        return f"{text}::bigint" if as_int else text
    return f"json_extract({column}, '$.{key}')"


def lists_node(column: str, *, pg: bool) -> str:
    """A condition: the JSON list of node names in ``column`` holds the parameter ``?``."""
    if pg:
        return f"? IN (SELECT json_array_elements_text(({column})::json))"
    return f"? IN (SELECT value FROM json_each({column}))"


def limit(n: int) -> str:
    """``LIMIT n``, or nothing for ``n < 0`` (PostgreSQL refuses a negative limit)."""
    return f"LIMIT {int(n)}" if n >= 0 else ""
