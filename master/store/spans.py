"""Every job's RUNNING spans (from ``job_events`` and ``attempt_gpus``) with its owner and queue:
what a starting master rebuilds the queues' fair-share usage from."""

from __future__ import annotations

from dataclasses import dataclass

from master.store.dialect import json_field
from master.store.reads import Reader

_LIVE = frozenset({"PENDING", "ASSIGNED", "RUNNING"})


@dataclass(frozen=True, slots=True)
class UsageSpan:
    """One attempt's time RUNNING on ``gpus`` GPUs; ``end`` None: it still runs."""

    owner: str
    queue: str  # as the job's spec names it ("" = the owner's default)
    gpus: int
    start: float
    end: float | None


async def running_spans(read: Reader) -> list[UsageSpan]:
    """The RUNNING spans of every job, finished or not. A span a finished job left open (no
    event closed it) is dropped: when it ended is not known."""
    pg = read.pg
    gpus, owner = json_field("j.spec", "gpus", pg=pg, as_int=True), json_field("j.spec", "owner", pg=pg)
    rows = await read.rows(
        "SELECT e.job_id, e.attempt, e.at, e.from_state, e.to_state,"
        f" COALESCE(g.gpus, {gpus}, 1), COALESCE({owner}, j.owner, ''),"
        f" COALESCE({json_field('j.spec', 'queue', pg=pg)}, ''), j.state"
        " FROM job_events e JOIN jobs j ON j.id = e.job_id"
        " LEFT JOIN attempt_gpus g ON g.job_id = e.job_id AND g.attempt = e.attempt"
        " WHERE e.to_state = 'RUNNING' OR e.from_state = 'RUNNING' ORDER BY e.id"
    )
    out: list[UsageSpan] = []
    open_: dict[str, tuple[int, UsageSpan]] = {}
    live: set[str] = set()
    for job_id, attempt, at, from_state, to_state, gpus, owner, queue, state in rows:
        begun = open_.pop(job_id, None)
        if from_state == "RUNNING" and begun is not None and begun[0] == attempt:
            s = begun[1]
            out.append(UsageSpan(s.owner, s.queue, s.gpus, s.start, max(float(at), s.start)))
        if to_state == "RUNNING":
            open_[job_id] = (int(attempt), UsageSpan(str(owner), str(queue), int(gpus), float(at), None))
        if state in _LIVE:
            live.add(job_id)
    out += [span for job_id, (_, span) in open_.items() if job_id in live]
    return out
