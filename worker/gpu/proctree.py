"""Attribute GPU processes to the attempts that started them, through the /proc parent chain.

NVML reports the PIDs of the processes that hold a GPU context; those are often children (a
``python`` under a ``sh -c``, a dataloader worker, a process inside a container whose init the
runtime knows). The owner of a PID is its nearest ancestor, itself included, that an attempt
names. Blocking file reads: call from a thread.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable
from dataclasses import dataclass

from worker.gpu.base import ProbeTarget, ProcessReading

MAX_DEPTH = 64  # no real process tree is deeper; bounds the walk on a corrupt or racing /proc


def parent_pid(pid: int, proc_root: pathlib.Path = pathlib.Path("/proc")) -> int | None:
    """The parent of ``pid`` from ``/proc/<pid>/stat``; None if the process is gone or unreadable."""
    try:
        text = (proc_root / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    _, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 2:
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class RawProcess:
    """One process on one GPU as NVML lists it, before attribution."""

    pid: int
    uuid: str
    mem_mib: int
    util_sm: float | None


class OwnerIndex:
    """Finds the owning target PID of a process; caches parent links for one pass over /proc."""

    def __init__(self, target_pids: Iterable[int], proc_root: pathlib.Path = pathlib.Path("/proc")) -> None:
        self._targets = frozenset(p for p in target_pids if p > 0)
        self._root = proc_root
        self._parents: dict[int, int | None] = {}

    def owner(self, pid: int) -> int | None:
        """The nearest ancestor of ``pid`` (``pid`` itself first) that is a target PID, else None."""
        current: int | None = pid
        for _ in range(MAX_DEPTH):
            if current is None or current <= 1:
                return None
            if current in self._targets:
                return current
            current = self._parent(current)
        return None

    def _parent(self, pid: int) -> int | None:
        if pid not in self._parents:
            self._parents[pid] = parent_pid(pid, self._root)
        return self._parents[pid]


def attribute(
    raw: Iterable[RawProcess], targets: Iterable[ProbeTarget], proc_root: pathlib.Path
) -> list[ProcessReading]:
    """Sum the GPU processes per (owning target PID, GPU); unowned processes keep their own PID."""
    index = OwnerIndex((pid for t in targets for pid in t.pids), proc_root)
    merged: dict[tuple[int, str], tuple[int, float | None]] = {}
    for p in raw:
        key = (index.owner(p.pid) or p.pid, p.uuid)
        mem, util = merged.get(key, (0, None))
        if p.util_sm is not None:
            util = min(100.0, (util or 0.0) + p.util_sm)
        merged[key] = (mem + p.mem_mib, util)
    return [ProcessReading(pid, uuid, mem, util) for (pid, uuid), (mem, util) in merged.items()]
