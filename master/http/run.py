"""Starting and stopping the master's HTTP servers and the hooks their metrics need."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from master.auth import TokenTable
from master.http.server import Dashboard, metrics_app, start_site
from master.loopmon import LoopMonitor
from master.observe.history import UtilHistory
from master.observe.metrics import MasterMetrics
from master.services.core import Core
from master.services.scheduler import Scheduler

log = logging.getLogger(__name__)


class HttpSide:
    """``--http-listen`` (dashboard) and ``--metrics-listen`` (``/metrics``); either may be off."""

    def __init__(
        self, core: Core, scheduler: Scheduler, tokens: TokenTable | None, monitor: LoopMonitor | None = None
    ) -> None:
        self.core = core
        self.metrics = MasterMetrics(core, monitor)
        scheduler.observers.append(self.metrics.on_pass)
        core.events.add_listener(self.metrics.on_event)
        self.history = UtilHistory()
        self._tokens = tokens
        self._runners: list[web.AppRunner] = []
        self._task: asyncio.Task[None] | None = None
        self.http_port = 0
        self.metrics_port = 0

    async def start(self, http_listen: str | None, metrics_listen: str | None) -> None:
        try:
            if http_listen is not None:
                app = Dashboard(self.core, self._tokens, self.history).app()
                runner, self.http_port = await start_site(app, http_listen)
                self._runners.append(runner)
                interval = self.core.config.heartbeat_s
                self._task = asyncio.create_task(
                    self.history.run(self.core.registry, self.core.clock, interval), name="horus-util-history"
                )
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
