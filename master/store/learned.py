"""Learned throughputs: solo samples/s per signature and normalised speeds of measured pairs.

One write op folds what one attempt measured into both tables inside the writer's transaction,
so two attempts of the same signature ending at once cannot lose each other's update.
"""

from __future__ import annotations

from dataclasses import dataclass

from master.store.dialect import upsert
from master.store.writer import Conn, WriteOp

EWMA_WEIGHT = 0.3  # weight of a new measurement (the interference model uses the same)
MAX_ROWS = 100_000  # per table; new keys beyond it are dropped (existing rows still update)
MIN_SPEED = 0.01  # a measured speed is kept in [MIN_SPEED, 1.0]; 0 would read as "does not fit"
_SOLO_UPSERT = upsert(
    "solo_throughputs",
    ("job_type", "gpu_type", "gpus", "samples_per_s", "samples", "updated_at"),
    ("job_type", "gpu_type", "gpus"),
)
_PAIR_UPSERT = upsert(
    "pair_speeds",
    ("job_type", "co_runner", "gpu_type", "speed", "samples", "updated_at"),
    ("job_type", "co_runner", "gpu_type"),
)


@dataclass(frozen=True)
class SoloRow:
    job_type: str
    gpu_type: str
    gpus: int
    samples_per_s: float
    samples: int
    updated_at: float


@dataclass(frozen=True)
class PairRow:
    job_type: str  # the measured signature
    co_runner: str  # the one signature it shared its GPU(s) with
    gpu_type: str
    speed: float  # shared samples/s / solo samples/s
    samples: int
    updated_at: float


@dataclass(frozen=True)
class PairMeasurement:
    """One attempt's throughput next to one co-runner signature, with its own solo reference."""

    co_runner: str
    shared_rate: float
    own_solo_rate: float | None  # the same attempt's solo phase; None: use the learned one


@dataclass(frozen=True)
class LearnedPair:
    """What :class:`RecordRatesOp` stored for one pair, for the interference model."""

    job_type: str
    co_runner: str
    gpu_type: str
    measured: float  # this measurement's normalised speed
    speed: float  # the stored estimate after folding it in
    reverse: float | None  # the stored estimate of the other direction, if measured


def ewma(old: float | None, new: float) -> float:
    return new if old is None else old + EWMA_WEIGHT * (new - old)


def clamp_speed(speed: float) -> float:
    return min(1.0, max(MIN_SPEED, speed))


@dataclass(frozen=True)
class RecordRatesOp(WriteOp[list[LearnedPair]]):
    """Fold an attempt's solo throughput and pair throughputs in; return the pairs learned.

    A pair's speed is ``shared_rate / solo`` where solo is the attempt's own solo phase, else
    the learned solo throughput of the signature on this GPU type and count; without either
    the measurement is skipped.
    """

    job_type: str
    gpu_type: str
    gpus: int
    solo_rate: float | None
    pairs: tuple[PairMeasurement, ...]
    now: float

    def apply(self, conn: Conn) -> list[LearnedPair]:
        if self.solo_rate is not None:
            self._fold_solo(conn, self.solo_rate)
        out: list[LearnedPair] = []
        for p in self.pairs:
            solo = p.own_solo_rate if p.own_solo_rate is not None else self._learned_solo(conn)
            if solo is None or solo <= 0.0 or p.shared_rate <= 0.0:
                continue
            measured = clamp_speed(p.shared_rate / solo)
            speed = self._fold_pair(conn, p.co_runner, measured)
            if speed is None:
                continue
            reverse = conn.execute(
                "SELECT speed FROM pair_speeds WHERE job_type = ? AND co_runner = ? AND gpu_type = ?",
                (p.co_runner, self.job_type, self.gpu_type),
            ).fetchone()
            out.append(
                LearnedPair(
                    self.job_type,
                    p.co_runner,
                    self.gpu_type,
                    measured,
                    speed,
                    None if reverse is None else float(reverse[0]),
                )
            )
        return out

    def _learned_solo(self, conn: Conn) -> float | None:
        row = conn.execute(
            "SELECT samples_per_s FROM solo_throughputs WHERE job_type = ? AND gpu_type = ? AND gpus = ?",
            (self.job_type, self.gpu_type, self.gpus),
        ).fetchone()
        return None if row is None else float(row[0])

    def _fold_solo(self, conn: Conn, rate: float) -> None:
        key = (self.job_type, self.gpu_type, self.gpus)
        old = conn.execute(
            "SELECT samples_per_s, samples FROM solo_throughputs"
            " WHERE job_type = ? AND gpu_type = ? AND gpus = ?",
            key,
        ).fetchone()
        if old is None and _full(conn, "solo_throughputs"):
            return
        value = ewma(None if old is None else float(old[0]), rate)
        samples = 1 + (0 if old is None else int(old[1]))
        conn.execute(
            _SOLO_UPSERT,
            (*key, value, samples, self.now),
        )

    def _fold_pair(self, conn: Conn, co_runner: str, measured: float) -> float | None:
        key = (self.job_type, co_runner, self.gpu_type)
        old = conn.execute(
            "SELECT speed, samples FROM pair_speeds WHERE job_type = ? AND co_runner = ? AND gpu_type = ?",
            key,
        ).fetchone()
        if old is None and _full(conn, "pair_speeds"):
            return None
        speed = clamp_speed(ewma(None if old is None else float(old[0]), measured))
        samples = 1 + (0 if old is None else int(old[1]))
        conn.execute(
            _PAIR_UPSERT,
            (*key, speed, samples, self.now),
        )
        return speed


def _full(conn: Conn, table: str) -> bool:
    row = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
    return int(row[0]) >= MAX_ROWS
