"""One worker stream as the services see it: a bounded outgoing queue drained by one sender."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque

from horus_core.plane import ToWorker

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class Session:
    def __init__(self, node: str, maxsize: int = 4096) -> None:
        self.node = node
        self.id = next(_ids)
        self.close_reason = ""
        self.closed_by_peer = False  # the worker ended the stream (not the master)
        self._maxsize = maxsize
        self._queue: deque[ToWorker] = deque()
        self._closed = False
        # The sender waiting in next(), woken by send() and close(): one future per wait (a
        # Queue.get raced against an Event cost two tasks per message, bench/load.py).
        self._waiter: asyncio.Future[None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, msg: ToWorker) -> bool:
        """Queue ``msg`` for the worker; a worker that does not read its stream is disconnected."""
        if self._closed:
            return False
        if len(self._queue) >= self._maxsize:
            self.close("the worker does not read its stream (send queue full)")
            return False
        self._queue.append(msg)
        self._wake()
        return True

    def close(self, reason: str, *, by_peer: bool = False) -> None:
        if not self._closed:
            self.close_reason = reason
            self.closed_by_peer = by_peer
            self._closed = True
            self._wake()
            log.info("closing the stream of node %s: %s", self.node, reason)

    async def next(self) -> ToWorker | None:
        """The next message to send; None once the session is closed."""
        while not self._closed:
            if self._queue:
                return self._queue.popleft()
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __repr__(self) -> str:
        return f"Session({self.node!r}, id={self.id})"
