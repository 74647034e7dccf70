"""``horus-slurm up --adaptive``: a pilot pool sized to the master's queue. Each round reads the
queue and the nodes through the SDK and the pilots through squeue, asks the pure
:func:`horus_core.slurm.sizing.decide`, then submits or cancels pilots."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from horus_core.client import HorusClient
from horus_core.model import JobState, NodeState
from horus_core.slurm.script import PilotSpec
from horus_core.slurm.sizing import PoolPilot, Sizing, decide, wanted_gpus
from horus_core.slurmcli import commands

log = logging.getLogger("horus.slurm")


@dataclass
class PoolConfig:
    spec: PilotSpec
    min_pilots: int = 0
    max_pilots: int = 1
    grace_s: float = 300.0  # a pilot idle this long is released
    interval_s: float = 10.0


@dataclass
class Pool:
    """The pilots this pool submitted, and since when each registered one has been idle."""

    config: PoolConfig
    client: HorusClient
    clock: Callable[[], float] = time.time
    mine: set[str] = field(default_factory=set)
    idle_since: dict[str, float] = field(default_factory=dict)

    async def step(self) -> Sizing:
        """One round: read, decide, act; what was decided."""
        now = self.clock()
        live = {j.job_id: j for j in await commands.pilots() if j.active}
        self.mine &= set(live)
        nodes = {n.slurm.job_id: n for n in await self.client.nodes() if n.slurm is not None}
        used: dict[str, int] = {}  # node -> GPUs with a job
        for g in await self.client.gpus():
            used[g.gpu.node] = used.get(g.gpu.node, 0) + (1 if g.job_ids else 0)
        waiting = await self.client.list(states=[JobState.PENDING])
        pool, free = [], 0
        for job_id in sorted(self.mine):
            node = nodes.get(job_id)
            ready = node is not None and node.state is NodeState.READY and live[job_id].state == "RUNNING"
            busy = node is not None and (used.get(node.name, 0) > 0 or node.state is not NodeState.READY)
            if ready and node is not None and not busy:
                self.idle_since.setdefault(job_id, now)
                free += len(node.gpus)
            else:
                self.idle_since.pop(job_id, None)
                free += len(node.gpus) - used.get(node.name, 0) if ready and node is not None else 0
            gpus = len(node.gpus) if node is not None else self.config.spec.gpus_per_node
            pool.append(PoolPilot(job_id, ready, gpus, busy, self.idle_since.get(job_id)))
        sizing = decide(
            pool,
            waiting_gpus=wanted_gpus((j.spec for j in waiting), self.config.spec.gpus_per_node),
            free_gpus=free,
            gpus_per_node=self.config.spec.gpus_per_node,
            min_pilots=self.config.min_pilots,
            max_pilots=self.config.max_pilots,
            grace_s=self.config.grace_s,
            now=now,
        )
        await self._apply(sizing)
        return sizing

    async def _apply(self, sizing: Sizing) -> None:
        for _ in range(sizing.submit):
            job_id = await commands.submit(self.config.spec)
            self.mine.add(job_id)
            log.info("submitted pilot %s (%s)", job_id, sizing.why)
        if sizing.release:
            await commands.cancel(sizing.release)
            self.mine.difference_update(sizing.release)
            for job_id in sizing.release:
                self.idle_since.pop(job_id, None)
            log.info("released pilot(s) %s (%s)", ", ".join(sizing.release), sizing.why)

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until ``stop``; then the pool's pilots are cancelled (their jobs re-queued)."""
        try:
            while not stop.is_set():
                try:
                    await self.step()
                except commands.SlurmError as exc:
                    log.error("%s", exc)
                except Exception as exc:  # (the master may be away for a while: try again)
                    log.warning("round failed: %s: %s", type(exc).__name__, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.interval_s)
        finally:
            if self.mine:
                log.info("stopping: cancelling pilot(s) %s", ", ".join(sorted(self.mine)))
                await commands.cancel(sorted(self.mine))
