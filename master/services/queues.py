"""The live master's queues: the config file (read at start, reloaded on SIGHUP), checks at submit,
and the usage ``hctl queues`` shows. The decisions are :class:`horus_core.queues.QueuedPolicy`'s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from horus_core.packing.cluster import gpu_type
from horus_core.queues import QueuedPolicy, load_config
from horus_core.queues.usage import queue_usage
from horus_core.queueusage import QueueUsage, quota_warnings
from master.services.core import JobWriter, Wakeup
from master.services.nodes import NodeRegistry

log = logging.getLogger(__name__)


class QueueService:
    def __init__(
        self,
        policy: QueuedPolicy,
        path: pathlib.Path,
        *,
        registry: NodeRegistry,
        writer: JobWriter,
        wakeup: Wakeup,
    ) -> None:
        self.registry, self.writer, self.wakeup = registry, writer, wakeup
        self.policy = policy
        self.path = path
        self._warned: set[str] = set()

    async def reload(self, pass_lock: asyncio.Lock) -> bool:
        """Read the file again; a bad file is logged and the config in force is kept. The new one
        takes over between two passes (under ``pass_lock``, which a pass holds from its snapshot
        to its commit): no pass decides with parts of two configurations (issue 39)."""
        try:
            config = load_config(str(self.path))
        except InvalidArgument as exc:
            log.error("queues: %s; keeping the configuration in force", exc)
            return False
        async with pass_lock:
            self.policy.reload(config)
        log.info("queues: reloaded %s (%d queues)", self.path, len(config.queues))
        self.wakeup.poke()
        return True

    def check(self, spec: JobSpec) -> JobSpec:
        """The spec with its queue filled in; :class:`InvalidArgument` if it may not be queued."""
        queue = self.policy.config.check_job(spec.owner, spec.queue, spec.priority_class)
        return spec if spec.queue == queue else dataclasses.replace(spec, queue=queue)

    def usage(self) -> list[QueueUsage]:
        types = {g.uuid: gpu_type(g) for n in self.registry.schedulable() for g in n.gpus}
        rows = queue_usage(self.policy.config, self.writer.live.jobs(), types)
        self.warnings(rows)
        return rows

    def usage_and_warnings(self) -> tuple[list[QueueUsage], list[str]]:
        rows = self.usage()
        return rows, self.warnings(rows)

    def warnings(self, rows: list[QueueUsage]) -> list[str]:
        """Quotas the registered nodes cannot honour at once; each new one is logged once."""
        gpus: dict[str, int] = {}
        for n in self.registry.all():
            for g in n.gpus:
                gpus[gpu_type(g)] = gpus.get(gpu_type(g), 0) + 1
        said = quota_warnings(rows, gpus) if gpus else []
        for text in set(said) - self._warned:
            log.warning("queues: %s: reclaim cannot give every queue its quota", text)
        self._warned = set(said)
        return said
