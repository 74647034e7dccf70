"""Injected faults for simulated GPUs (``--fake-gpu-faults FILE``), to exercise the master's
quarantine without broken hardware (docs/nodes.md).

The file holds lines ``INDEX xid CODE`` (one Xid event on GPU INDEX, reported once) and
``INDEX ecc COUNT`` (the GPU's cumulative uncorrected ECC count from now on). Lines are read as
they are appended; a line that does not parse is logged and skipped.
"""

from __future__ import annotations

import logging
import pathlib
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
MAX_READ = 1 << 16  # bytes taken per reading


@dataclass(frozen=True, slots=True)
class GpuFaults:
    ecc_errors: int = 0
    xid_events: tuple[int, ...] = ()


@dataclass
class FaultFile:
    path: pathlib.Path
    _offset: int = 0
    _ecc: dict[int, int] = field(default_factory=dict)

    def take(self) -> dict[int, GpuFaults]:
        """GPU index -> its ECC count and the Xid events appended since the last call."""
        xids: dict[int, list[int]] = {}
        for line in self._new_lines():
            parsed = _parse(line)
            if parsed is None:
                log.warning(
                    "--fake-gpu-faults: ignored line %r (expected 'INDEX xid N' or 'INDEX ecc N')", line
                )
            elif parsed[1] == "xid":
                xids.setdefault(parsed[0], []).append(parsed[2])
            else:
                self._ecc[parsed[0]] = parsed[2]
        return {i: GpuFaults(self._ecc.get(i, 0), tuple(xids.get(i, ()))) for i in set(self._ecc) | set(xids)}

    def _new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read(MAX_READ)
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # whole lines only: a half-written one waits for its end
        self._offset += end
        return [ln.strip() for ln in data[:end].decode("utf-8", "replace").splitlines() if ln.strip()]


def _parse(line: str) -> tuple[int, str, int] | None:
    parts = line.split()
    if len(parts) != 3 or parts[1] not in ("xid", "ecc") or not (parts[0].isdigit() and parts[2].isdigit()):
        return None
    return int(parts[0]), parts[1], int(parts[2])
