"""A tiny progress bar on a text stream (stderr), redrawn at most a few times per second."""

from __future__ import annotations

import time
from typing import TextIO


class ProgressBar:
    def __init__(self, label: str, stream: TextIO, width: int = 30, interval_s: float = 0.2) -> None:
        self.label = label
        self.stream = stream
        self.width = width
        self.interval_s = interval_s
        self._last_draw = -float("inf")
        self._started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last_draw >= self.interval_s:
            self._last_draw = now
            self._draw(done, total, now)

    def _draw(self, done: int, total: int, now: float) -> None:
        frac = done / total if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} jobs  {now - self._started:.0f} s")
        self.stream.flush()

    def close(self, total: int) -> None:
        self._draw(total, total, time.monotonic())
        self.stream.write("\n")
        self.stream.flush()
