"""Who shares an attempt's GPUs, and its throughput alone and next to each co-runner (pure).

The learner classifies every running attempt at each heartbeat (:func:`sharing_of`) and files
each progress report's samples/s under what the attempt's GPUs held at that moment
(:class:`RateTrack`): alone, or next to exactly one co-runner signature. Reports taken within
``settle_s`` of a change are left out (the job's speed and its own averaging lag behind), and so
is everything while a co-runner is starting or stopping, or several signatures share its GPUs.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from horus_core.model import Job

AttemptKey = tuple[str, int]
SOLO = ""  # Sharing.partner of an attempt alone on all its GPUs
MAX_RATE = 1e12  # samples/s; anything larger is a broken report


@dataclass(frozen=True)
class Sharing:
    """How one attempt's GPUs are shared at one moment."""

    signature: str
    partner: str | None  # SOLO, the one co-runner signature, or None: not usable now
    partners: frozenset[AttemptKey]
    gpu_type: str
    gpus: int


def sharing_of(
    jobs: Sequence[Job],
    running: Collection[AttemptKey],
    gpu_types: Mapping[str, str],
    signature: Callable[[Job], str],
) -> dict[AttemptKey, Sharing]:
    """Every attempt of ``jobs`` (one node's active jobs) the worker reports as running."""
    live = [j for j in jobs if (j.id, j.attempt) in running]
    starting = {u for j in jobs if (j.id, j.attempt) not in running for u in j.gpus}
    on_gpu: dict[str, list[Job]] = {}
    for j in live:
        for uuid in j.gpus:
            on_gpu.setdefault(uuid, []).append(j)
    sigs = {j.id: signature(j) for j in live}
    out: dict[AttemptKey, Sharing] = {}
    for j in live:
        others = {o.id: o for uuid in j.gpus for o in on_gpu[uuid] if o.id != j.id}
        types = {gpu_types.get(uuid, "") for uuid in j.gpus}
        partner: str | None = None
        usable = (
            len(types) == 1
            and "" not in types
            and sigs[j.id] != ""
            and not any(uuid in starting for uuid in j.gpus)
            and all(len(on_gpu[uuid]) <= 2 for uuid in j.gpus)  # a pair per GPU, never a triple
        )
        if usable:
            partner_sigs = {sigs[o] for o in others}
            if not partner_sigs:
                partner = SOLO
            elif len(partner_sigs) == 1 and "" not in partner_sigs:
                partner = partner_sigs.pop()
        out[(j.id, j.attempt)] = Sharing(
            sigs[j.id],
            partner,
            frozenset((o.id, o.attempt) for o in others.values()),
            next(iter(types)) if len(types) == 1 else "",
            len(j.gpus),
        )
    return out


@dataclass(frozen=True)
class Rates:
    """What one attempt measured since the last time: ready to be stored and learned from."""

    signature: str
    gpu_type: str
    gpus: int
    solo_rate: float | None  # samples/s alone (median of recent reports)
    pairs: tuple[tuple[str, float, float | None], ...]  # (co-runner, samples/s shared, own solo ref)


@dataclass
class RateTrack:
    """Throughput reports of one attempt, filed by what shared its GPUs when they came in."""

    max_samples: int = 32
    max_partners: int = 4
    state: Sharing | None = None
    since: float = 0.0
    identity: tuple[str, str, int] | None = None  # (signature, gpu type, GPUs), fixed once known
    last_step: int | None = None
    solo: deque[float] = field(default_factory=deque)
    solo_new: int = 0
    shared: dict[str, deque[float]] = field(default_factory=dict)

    def observe(self, sharing: Sharing | None, now: float) -> None:
        """The attempt's sharing at a heartbeat (None: not running there, or unknown)."""
        if sharing is not None:
            ident = (sharing.signature, sharing.gpu_type, sharing.gpus)
            if self.identity is None and sharing.partner is not None:
                self.identity = ident
            if ident != self.identity:
                sharing = None
        if _key(sharing) != _key(self.state):
            self.since = now
        self.state = sharing

    def forget(self, partner: AttemptKey) -> None:
        """A co-runner ended: reports are not filed until the next heartbeat shows the GPUs."""
        if self.state is not None and partner in self.state.partners:
            self.state = None

    def add(self, step: int, rate: float, now: float, settle_s: float) -> bool:
        """File one report; False when it is left out (duplicate, bad, or taken while unsettled)."""
        if self.last_step is not None and step <= self.last_step:
            return False
        self.last_step = step
        state = self.state
        if state is None or state.partner is None or now - self.since < settle_s:
            return False
        if not (math.isfinite(rate) and 0.0 < rate < MAX_RATE):
            return False
        if state.partner == SOLO:
            _push(self.solo, rate, self.max_samples)
            self.solo_new += 1
            return True
        bucket = self.shared.get(state.partner)
        if bucket is None:
            if len(self.shared) >= self.max_partners:
                return False
            bucket = self.shared[state.partner] = deque()
        _push(bucket, rate, self.max_samples)
        return True

    def take(self, min_samples: int, *, final: bool, solo_known: bool) -> Rates | None:
        """What is ready: the solo throughput if ``min_samples`` new solo reports came in, and each
        co-runner with ``min_samples`` reports. Without a solo reference of its own an attempt
        keeps its shared reports until the end, unless a learned one exists (``solo_known``)."""
        if self.identity is None:
            return None
        solo_rate = median(self.solo) if self.solo_new >= min_samples else None
        own_ref = median(self.solo) if len(self.solo) >= min_samples else None
        pairs = []
        if own_ref is not None or solo_known or final:
            for partner, samples in list(self.shared.items()):
                if len(samples) >= min_samples:
                    pairs.append((partner, median(samples), own_ref))
                    del self.shared[partner]
        if solo_rate is not None:
            self.solo_new = 0
        if solo_rate is None and not pairs:
            return None
        sig, gpu_type, gpus = self.identity
        return Rates(sig, gpu_type, gpus, solo_rate, tuple(pairs))


def _key(s: Sharing | None) -> tuple[str | None, frozenset[AttemptKey]] | None:
    return None if s is None else (s.partner, s.partners)


def _push(samples: deque[float], value: float, limit: int) -> None:
    samples.append(value)
    while len(samples) > limit:
        samples.popleft()


@dataclass(frozen=True)
class SharedNow:
    """An attempt sharing its GPUs with one co-runner signature right now, as its reports show it
    so far (the dashboard's pair speeds while jobs share; stored ones come every checkpoint)."""

    job_id: str
    attempt: int
    signature: str
    co_runner: str
    gpu_type: str
    gpus: int
    shared_rate: float | None  # median samples/s next to it (None: no settled report yet)
    reports: int
    own_solo_rate: float | None  # median samples/s of its own solo phase, if it had one


def sharing_now(tracks: Mapping[AttemptKey, RateTrack]) -> list[SharedNow]:
    """Every tracked attempt whose GPUs it shares with exactly one co-runner signature now."""
    out = []
    for (job_id, attempt), track in tracks.items():
        state = track.state
        if state is None or state.partner in (None, SOLO) or track.identity is None:
            continue
        partner = str(state.partner)
        samples = track.shared.get(partner, ())
        out.append(
            SharedNow(
                job_id,
                attempt,
                state.signature,
                partner,
                state.gpu_type,
                state.gpus,
                median(samples) if samples else None,
                len(samples),
                median(track.solo) if track.solo else None,
            )
        )
    return out
