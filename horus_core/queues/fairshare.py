"""Fair share between the users of a queue: decayed attained GPU-time and Slurm's factor.

Every user's attained service is the GPU-seconds their active jobs held, decayed with a
half-life, so that old usage counts less (``usage * 2 ** (-dt / half_life)``). Within a queue a
user's fair-share factor is Slurm's classic ``F = 2 ** (-U / S)``: ``U`` the user's share of the
queue's decayed usage, ``S`` the user's share of the weights of the queue's users. ``F`` is 1 for
a user who used nothing, 0.5 for one who used exactly their share, and falls towards 0 above it;
pending jobs of users with a higher factor are served first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Key = tuple[str, str]  # (queue, user)
# (queue, user), GPUs, start, end (None: still running): one attempt's time holding its GPUs
Span = tuple[Key, int, float, float | None]


@dataclass
class FairShare:
    """Decayed GPU-seconds per (queue, user); fed the active jobs at every scheduling pass."""

    half_life_s: float
    usage: dict[Key, float] = field(default_factory=dict)
    _held: dict[Key, int] = field(default_factory=dict)  # GPUs held since the last update
    _last: float | None = None

    def update(self, holding: Iterable[tuple[Key, int]], now: float) -> None:
        """:meth:`charge` up to ``now``, then :meth:`hold` ``holding``."""
        self.charge(now)
        self.hold(holding)

    def charge(self, now: float) -> None:
        """Decay, and charge what was held since the last charge for the interval.

        Exact when the holdings are set at every change (the simulator does; the master every
        pass): what is held is charged as the integral of ``gpus * decay`` over the interval."""
        if self._last is not None and now > self._last:
            decay = 2.0 ** (-(now - self._last) / self.half_life_s)
            for key in self.usage:
                self.usage[key] *= decay
            for key, gpus in self._held.items():
                self.usage[key] = self.usage.get(key, 0.0) + gpus * self.half_life_s / _LN2 * (1.0 - decay)
        if self._last is None or now >= self._last:
            self._last = now

    def hold(self, holding: Iterable[tuple[Key, int]]) -> None:
        """What is held from now until the next charge: (queue, user) and GPUs."""
        held: dict[Key, int] = {}
        for key, gpus in holding:
            held[key] = held.get(key, 0) + gpus
        self._held = held

    def restore(self, spans: Iterable[Span], now: float) -> None:
        """Rebuild the usage at ``now`` from the attempts' spans (a restarted master's memory is
        empty): each span is charged as :meth:`charge` would have charged it, decayed to ``now``;
        the spans still open are held from ``now`` on. Replaces what was there."""
        scale, usage, holding = self.half_life_s / _LN2, dict[Key, float](), []
        for key, gpus, start, end in spans:
            stop = now if end is None else min(end, now)
            if stop > start and gpus > 0:
                left = 2.0 ** (-(now - stop) / self.half_life_s) - 2.0 ** (-(now - start) / self.half_life_s)
                usage[key] = usage.get(key, 0.0) + gpus * scale * left
            if end is None:
                holding.append((key, gpus))
        self.usage, self._last = usage, now
        self.hold(holding)

    def factor(self, queue: str, user: str, users: Iterable[str], weights: Mapping[str, float]) -> float:
        """Slurm's fair-share factor of ``user`` among ``users`` of ``queue`` (weights default 1)."""
        members = set(users) | {user} | {u for q, u in self.usage if q == queue}
        total_w = sum(weights.get(u, 1.0) for u in members)
        total_u = sum(self.usage.get((queue, u), 0.0) for u in members)
        if total_u <= 0.0:
            return 1.0
        share = weights.get(user, 1.0) / total_w
        used = self.usage.get((queue, user), 0.0) / total_u
        return float(2.0 ** (-used / share))


_LN2 = 0.6931471805599453
