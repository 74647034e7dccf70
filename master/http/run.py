"""Starting and stopping the master's HTTP servers and the hooks their metrics need."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from aiohttp import web

from master.auth import TokenTable
from master.clock import Clock
from master.http.server import Dashboard, Position, Quotas, metrics_app, start_site
from master.loopmon import LoopMonitor
from master.observe.history import UtilHistory
from master.observe.metrics import MasterMetrics
from master.observe.view import ViewSources
from master.services.events import EventBus
from master.services.logs import LogStore
from master.services.scheduler import Scheduler
from master.store.live import LiveIndex

log = logging.getLogger(__name__)


class HttpSide:
    """``--http-listen`` (dashboard) and ``--metrics-listen`` (``/metrics``); either may be off.

    Given the parts it reads (``sources``: the store's reader, the registry, the learner; ``live``:
    the master's live-job index; ``position``: the queue positions of the last pass) and hooks
    itself into ``scheduler`` (each pass) and ``events`` (each job change) for the metrics. The
    utilisation history samples the registry every ``heartbeat_s`` on ``clock``."""

    def __init__(
        self,
        *,
        sources: ViewSources,
        live: Callable[[], LiveIndex],
        logs: LogStore,
        position: Position,
        events: EventBus,
        scheduler: Scheduler,
        clock: Clock,
        heartbeat_s: float,
        tokens: TokenTable | None,
        monitor: LoopMonitor | None = None,
        quotas: Quotas | None = None,
    ) -> None:
        self.metrics = MasterMetrics(sources, live, monitor)
        scheduler.observers.append(self.metrics.on_pass)
        events.add_listener(self.metrics.on_event)
        self.history = UtilHistory()
        self._sources, self._logs, self._position = sources, logs, position
        self._clock, self._heartbeat_s = clock, heartbeat_s
        self._tokens = tokens
        self._quotas = quotas
        self._runners: list[web.AppRunner] = []
        self._task: asyncio.Task[None] | None = None
        self.http_port = 0
        self.metrics_port = 0

    async def start(self, http_listen: str | None, metrics_listen: str | None) -> None:
        try:
            if http_listen is not None:
                pages = Dashboard(
                    self._sources, self._logs, self._position, self._tokens, self.history, self._quotas
                )
                runner, self.http_port = await start_site(pages.app(), http_listen)
                self._runners.append(runner)
                sampling = self.history.run(self._sources.registry, self._clock, self._heartbeat_s)
                self._task = asyncio.create_task(sampling, name="horus-util-history")
                log.info("dashboard on http://%s", _address(http_listen, self.http_port))
            if metrics_listen is not None:
                runner, self.metrics_port = await start_site(metrics_app(self.metrics), metrics_listen)
                self._runners.append(runner)
                log.info("metrics on http://%s/metrics", _address(metrics_listen, self.metrics_port))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()


def _address(listen: str, port: int) -> str:
    return f"{listen.rpartition(':')[0]}:{port}"
