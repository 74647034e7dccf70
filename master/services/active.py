"""Each node's active (ASSIGNED / RUNNING) jobs in memory, kept in step with every transition.

A worker's heartbeat needs its node's active jobs (fencing, the learner): 500 a second from
1,000 workers, each a read on the one reader connection (bench/load.py). Every job transition
goes through :meth:`master.services.core.Core.apply`, which hands its changes here once their
write has ended, so a node's rows, once read, are updated from the changes instead of read again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from master.store.jobs import Change
from master.store.rows import JobRow


class ActiveByNode:
    def __init__(self, read: Callable[[str], Awaitable[list[JobRow]]]) -> None:
        self._read = read
        self._rows: dict[str, list[JobRow]] = {}
        self._touched: dict[str, int] = {}  # node -> changes seen (a read overlapping one is not kept)
        self._epoch = 0  # bumped when a write's outcome is unknown

    async def get(self, node: str) -> list[JobRow]:
        """As ``store.read.active_jobs(node)``: in submission order."""
        rows = self._rows.get(node)
        if rows is None:
            seen = (self._epoch, self._touched.get(node, 0))
            rows = await self._read(node)
            if (self._epoch, self._touched.get(node, 0)) == seen:
                self._rows[node] = rows
        return list(rows)

    def written(self, changes: Iterable[Change]) -> None:
        """Committed transitions: each moves its job out of its old node's rows and, if still
        active, into its new node's."""
        for c in changes:
            for node in {c.before.job.node, c.after.job.node}:
                self._touched[node] = self._touched.get(node, 0) + 1
                rows = self._rows.get(node)
                if rows is None:
                    continue
                kept = [r for r in rows if r.job.id != c.after.job.id]
                if c.after.job.node == node and c.after.job.state.active:
                    kept.append(c.after)
                    kept.sort(key=lambda r: r.seq)
                self._rows[node] = kept

    def unknown(self) -> None:
        """A write failed or was cancelled: whatever it did, read every node again."""
        self._epoch += 1
        self._rows.clear()
