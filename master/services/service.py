"""Nodes and GPUs out of service: cordon, drain and uncordon (admins), and the automatic quarantine
of a GPU whose readings show an Xid or ECC error (docs/nodes.md).

The registry's :class:`~master.services.nodes.ServiceBook` is what policies and listings see;
each change is written to the store first (tables of migration 0008), then to the book.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from horus_core import service as rules
from horus_core.errors import InvalidArgument, NotFound
from horus_core.model import Node, NodeState, Preempt
from horus_core.plane import Heartbeat
from master.clock import Clock
from master.services.core import JobWriter, Wakeup
from master.services.nodes import NodeEntry, NodeRegistry
from master.store import Store
from master.store.service import GpuHealthRow, LoadServiceOp, SetGpuHealthOp, SetNodeServiceOp

log = logging.getLogger(__name__)


class ServiceDesk:
    def __init__(
        self, *, store: Store, clock: Clock, registry: NodeRegistry, writer: JobWriter, wakeup: Wakeup
    ) -> None:
        self.store, self.clock, self.registry = store, clock, registry
        self.writer, self.wakeup = writer, wakeup

    async def load(self) -> None:
        """At start, before the nodes: what was out of service stays so."""
        nodes, gpus = await self.store.write(LoadServiceOp())
        book = self.registry.book
        book.modes = {r.name: (r.mode, r.drain_deadline) for r in nodes}
        book.quarantined = {g.uuid: (g.node, g.quarantine) for g in gpus if g.quarantine}
        book.ecc_seen = {g.uuid: g.ecc_seen for g in gpus}

    def _entry(self, name: str) -> NodeEntry:
        entry = self.registry.get(name)
        if entry is None:
            raise NotFound(f"no node named {name[:100]!r}")
        return entry

    async def cordon(
        self, name: str, *, drain: bool = False, timeout_s: float | None = None, by: str = "an admin"
    ) -> Node:
        """No new placements on ``name``; with ``drain``, its jobs are preempted at the timeout."""
        self._entry(name)  # (NOT_FOUND before anything changes)
        now = self.clock.now()
        deadline = rules.drain_deadline(now, timeout_s) if drain else None
        mode = NodeState.DRAINING if drain else NodeState.CORDONED
        await self.store.write(SetNodeServiceOp(name, mode, deadline, now))
        self.registry.book.modes[name] = (mode, deadline)
        self.registry.apply_service(name)
        log.info("node %s %s by %s%s", name, mode.value.lower(), by, _when(deadline, now))
        self.wakeup.poke()
        return self._entry(name).model()  # (the worker may have re-registered meanwhile)

    async def drain_self(self, name: str, timeout_s: float, reason: str, end_time: float = 0.0) -> None:
        """A worker drains its own node (a Slurm pilot warned of its job's end, docs/slurm.md):
        as ``hctl drain`` with ``timeout_s``, except that an earlier deadline already set stays."""
        entry = self._entry(name)
        if end_time > 0 and math.isfinite(end_time) and entry.slurm is not None:
            entry.slurm = dataclasses.replace(entry.slurm, end_time=end_time)
        timeout = min(max(0.0, timeout_s), rules.MAX_DRAIN_TIMEOUT_S) if math.isfinite(timeout_s) else 0.0
        mode, deadline = self.registry.book.modes.get(name, (None, None))
        now = self.clock.now()
        if mode is NodeState.DRAINING and deadline is not None and deadline <= now + timeout:
            return
        await self.cordon(name, drain=True, timeout_s=timeout, by=f"its worker ({reason[:200]})")

    async def uncordon(self, name: str, gpu_uuid: str = "") -> Node:
        """Back in service: the cordon or drain ends and the node's quarantined GPUs are released
        (with ``gpu_uuid``: only that GPU's quarantine)."""
        entry = self._entry(name)
        if gpu_uuid and gpu_uuid not in {g.uuid for g in entry.gpus}:
            raise InvalidArgument("gpu_uuid", f"node {name!r} has no GPU {gpu_uuid!r}")
        now, book = self.clock.now(), self.registry.book
        released = [
            u for u, (n, _) in book.quarantined.items() if n == name and (not gpu_uuid or u == gpu_uuid)
        ]
        # (the count at release: the latest reading, or the one that quarantined it if none came since)
        seen = [max(book.ecc_seen.get(u, 0), self._ecc_now(entry, u)) for u in released]
        rows = tuple(GpuHealthRow(u, name, "", n) for u, n in zip(released, seen, strict=True))
        if rows:
            await self.store.write(SetGpuHealthOp(rows, now))
        if not gpu_uuid:
            await self.store.write(SetNodeServiceOp(name, None, None, now))
            book.modes.pop(name, None)
        for r in rows:
            book.quarantined.pop(r.uuid, None)
            book.ecc_seen[r.uuid] = r.ecc_seen
        self.registry.apply_service(name)
        log.info("node %s back in service (%d GPU quarantine(s) released)", name, len(rows))
        self.wakeup.poke()
        return self._entry(name).model()  # (the worker may have re-registered meanwhile)

    @staticmethod
    def _ecc_now(entry: NodeEntry, uuid: str) -> int:
        stats = entry.gpu_stats.get(uuid)
        return int(stats.ecc_errors) if stats is not None else 0

    async def check_readings(self, entry: NodeEntry, hb: Heartbeat) -> None:
        """Quarantine every GPU of ``entry`` whose reading in ``hb`` shows a fault."""
        book, known = self.registry.book, {g.uuid for g in entry.gpus}
        rows = []
        for s in hb.gpus:
            if s.uuid not in known or s.uuid in book.quarantined:
                continue
            why = rules.gpu_fault(s.ecc_errors, s.xid_events, book.ecc_seen.get(s.uuid, 0))
            if why:
                rows.append(GpuHealthRow(s.uuid, entry.name, why, int(s.ecc_errors)))
        if not rows:
            return
        for r in rows:  # (in the book at once: the next heartbeat must not quarantine it again)
            book.quarantined[r.uuid] = (r.node, r.quarantine)
            book.ecc_seen[r.uuid] = r.ecc_seen
            log.warning("GPU %s of %s quarantined: %s", r.uuid, r.node, r.quarantine)
        self.registry.apply_service(entry.name)
        await self.store.write(SetGpuHealthOp(tuple(rows), self.clock.now()))

    def drain_preempts(self) -> list[Preempt]:
        """Preempts for the jobs still on draining nodes whose timeout has passed."""
        deadlines = self.registry.book.deadlines()
        if not deadlines:
            return []
        now = self.clock.now()
        jobs = [r.job for name in deadlines for r in self.writer.live.active_on(name)]
        return rules.drain_preempts(deadlines, jobs, now)


def _when(deadline: float | None, now: float) -> str:
    return "" if deadline is None else f" (jobs preempted in {max(0.0, deadline - now):g} s)"
