"""The live jobs (pending and active) as a scheduling pass reads them, decoded only where changed.

Every pass reads every live job. Decoding all of them from JSON each time cost ~400 ms at 12,500
jobs; most rows have not changed since the last pass. :class:`LiveRows` keeps the last read's
columns per job id: a row whose columns are all the same is the same (frozen) :class:`JobRow`
object, and a changed row keeps its :class:`JobSpec` object while its spec text is the same
(specs never change after submission). Same objects also let the policy's caches find the jobs
again by identity (``horus_core.packing.jobs``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from horus_core.model import JobSpec
from master.store.rows import JobRow, job_row_from_dict

LIVE_COLUMNS = (
    "id, request_id, spec, state, attempt, submitted_at, updated_at, started_at, finished_at, node, gpus,"
    " reason, exit_code, predicted_slowdown, cancel_requested, seq"
)
SELECT_LIVE = (
    f"SELECT {LIVE_COLUMNS} FROM jobs WHERE state IN ('PENDING', 'ASSIGNED', 'RUNNING') ORDER BY seq"
)
_NAMES = tuple(name.strip() for name in LIVE_COLUMNS.split(","))
_SPEC = _NAMES.index("spec")


class LiveRows:
    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Any, ...], JobRow]] = {}

    def decode(self, fetched: Iterable[Sequence[Any]]) -> list[JobRow]:
        """Rows for :data:`SELECT_LIVE`'s result, in its order."""
        last = self._last
        now: dict[str, tuple[tuple[Any, ...], JobRow]] = {}
        out: list[JobRow] = []
        for fetched_row in fetched:
            cols = tuple(fetched_row)
            prev = last.get(cols[0])
            if prev is not None and prev[0] == cols:
                row = prev[1]
            else:
                same_spec = prev is not None and prev[0][_SPEC] == cols[_SPEC]
                row = row_of(cols, prev[1].job.spec if prev is not None and same_spec else None)
            now[cols[0]] = (cols, row)
            out.append(row)
        self._last = now
        return out


def row_of(cols: tuple[Any, ...], spec: JobSpec | None = None) -> JobRow:
    """One :data:`LIVE_COLUMNS` row as a JobRow (``spec``: the already decoded spec, if known)."""
    d = dict(zip(_NAMES, cols, strict=True))
    d["gpus"] = json.loads(d["gpus"])
    if spec is None:
        d["spec"] = json.loads(d["spec"])
    return job_row_from_dict(d, spec)
