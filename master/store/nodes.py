"""Write operations on nodes, profiles and per-attempt statistics."""

from __future__ import annotations

import json
from dataclasses import dataclass

from horus_core.model import Gpu, NodeState
from master.store.dialect import upsert
from master.store.rows import gpus_to_json
from master.store.writer import Conn, WriteOp


@dataclass(frozen=True)
class UpsertNodeOp(WriteOp[None]):
    name: str
    gpus: tuple[Gpu, ...]
    state: NodeState
    version: str
    now: float
    rack: str = ""

    def apply(self, conn: Conn) -> None:
        conn.execute(
            "INSERT INTO nodes (name, gpus, state, version, registered_at, last_seen, rack)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET gpus = excluded.gpus, state = excluded.state,"
            " version = excluded.version, registered_at = excluded.registered_at,"
            " last_seen = excluded.last_seen, rack = excluded.rack",
            (
                self.name,
                gpus_to_json(self.gpus),
                self.state.value,
                self.version,
                self.now,
                self.now,
                self.rack,
            ),
        )


@dataclass(frozen=True)
class SetNodeStateOp(WriteOp[None]):
    name: str
    state: NodeState
    last_seen: float

    def apply(self, conn: Conn) -> None:
        conn.execute(
            "UPDATE nodes SET state = ?, last_seen = ? WHERE name = ?",
            (self.state.value, self.last_seen, self.name),
        )


@dataclass(frozen=True)
class ProfileRow:
    job_type: str
    util_avg: float
    util_peak: float
    mem_mib: int
    samples: int
    co_speed: dict[str, float]
    updated_at: float


@dataclass(frozen=True)
class AttemptStatsRow:
    job_id: str
    attempt: int
    node: str
    job_type: str
    samples: int
    solo_samples: int
    util_avg: float
    util_peak: float
    mem_peak_mib: int
    last_step: int = 0
    last_loss: float | None = None
    samples_per_s: float | None = None


_STATS_UPSERT = upsert(
    "attempt_stats",
    [
        "job_id",
        "attempt",
        "node",
        "job_type",
        "samples",
        "solo_samples",
        "util_avg",
        "util_peak",
        "mem_peak_mib",
        "last_step",
        "last_loss",
        "samples_per_s",
    ],
    ("job_id", "attempt"),
)
_PROFILE_UPSERT = upsert(
    "profiles",
    ("job_type", "util_avg", "util_peak", "mem_mib", "samples", "co_speed", "updated_at"),
    ("job_type",),
)


@dataclass(frozen=True)
class RecordAttemptOp(WriteOp[None]):
    """Store what one attempt measured and, when given, the updated profile of its signature."""

    stats: AttemptStatsRow
    profile: ProfileRow | None

    def apply(self, conn: Conn) -> None:
        s = self.stats
        conn.execute(
            _STATS_UPSERT,
            (
                s.job_id,
                s.attempt,
                s.node,
                s.job_type,
                s.samples,
                s.solo_samples,
                s.util_avg,
                s.util_peak,
                s.mem_peak_mib,
                s.last_step,
                s.last_loss,
                s.samples_per_s,
            ),
        )
        if self.profile is not None:
            _save_profile(conn, self.profile)


@dataclass(frozen=True)
class SaveProfileOp(WriteOp[None]):
    """Store a signature's profile (the learner's memory peak of a contained attempt)."""

    profile: ProfileRow

    def apply(self, conn: Conn) -> None:
        _save_profile(conn, self.profile)


def _save_profile(conn: Conn, p: ProfileRow) -> None:
    conn.execute(
        _PROFILE_UPSERT,
        (p.job_type, p.util_avg, p.util_peak, p.mem_mib, p.samples, json.dumps(p.co_speed), p.updated_at),
    )
