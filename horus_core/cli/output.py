"""Output shared by every command: aligned tables, JSON, and small value formatters."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TextIO

TABLE = "table"
JSON = "json"
YAML = "yaml"  # job files: ``hctl get job ID -o yaml`` (other commands print tables)
FORMATS = (TABLE, JSON, YAML)


class Output:
    """Where and how a command prints: ``fmt`` is ``table`` or ``json``."""

    def __init__(self, fmt: str = TABLE, stream: TextIO | None = None) -> None:
        self.fmt = fmt
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    @property
    def json(self) -> bool:
        return self.fmt == JSON

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def write_bytes(self, data: bytes) -> None:
        """Raw output (job logs): straight to the binary stream when there is one."""
        stream = self.stream
        buffer = getattr(stream, "buffer", None)
        stream.flush()
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(data.decode("utf-8", errors="replace"))
            stream.flush()

    def dump(self, obj: Any, *, compact: bool = False) -> None:
        """Print ``obj`` as JSON (``compact``: one line, for streams of JSON lines)."""
        if compact:
            self.line(json.dumps(obj, separators=(",", ":"), sort_keys=False))
        else:
            self.line(json.dumps(obj, indent=2))

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        self.line(render_table(headers, rows))


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks stripped."""
    cells = [[str(h) for h in headers], *([cell_text(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    return "\n".join(lines)


def render_fields(pairs: Iterable[tuple[str, object]]) -> str:
    """``Key:  value`` lines with the values aligned."""
    items = [(k, cell_text(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0) + 1
    return "\n".join(f"{(k + ':').ljust(width)}  {v}".rstrip() for k, v in items)


def cell_text(value: object) -> str:
    if value is None:
        return "-"
    text = " ".join(str(value).split())  # one line per row, whatever the value holds
    return text if text else "-"


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def age(ts: float | None, now: float | None = None) -> str:
    """Compact elapsed time since ``ts`` (unix seconds): 42s, 5m, 3h, 2d."""
    if not ts:
        return "-"
    secs = max(0, int((time.time() if now is None else now) - ts))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def timestamp(ts: float | None) -> str:
    if not ts:
        return "-"
    return f"{datetime.fromtimestamp(ts).isoformat(sep=' ', timespec='seconds')} ({age(ts)} ago)"


def pct(value: float) -> str:
    return f"{value:.0f}%"


def mib(value: int) -> str:
    return f"{value / 1024:.1f}G" if value >= 1024 else f"{value}M"
