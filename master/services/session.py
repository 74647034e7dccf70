"""One worker stream as the services see it: a bounded outgoing queue drained by one sender."""

from __future__ import annotations

import asyncio
import itertools
import logging

from horus_core.gen import worker_pb2 as wpb

log = logging.getLogger(__name__)
_ids = itertools.count(1)


class Session:
    def __init__(self, node: str, maxsize: int = 4096) -> None:
        self.node = node
        self.id = next(_ids)
        self.close_reason = ""
        self.closed_by_peer = False  # the worker ended the stream (not the master)
        self._queue: asyncio.Queue[wpb.MasterMessage] = asyncio.Queue(maxsize=maxsize)
        self._closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def send(self, msg: wpb.MasterMessage) -> bool:
        """Queue ``msg`` for the worker; a worker that does not read its stream is disconnected."""
        if self.closed:
            return False
        try:
            self._queue.put_nowait(msg)
        except asyncio.QueueFull:
            self.close("the worker does not read its stream (send queue full)")
            return False
        return True

    def close(self, reason: str, *, by_peer: bool = False) -> None:
        if not self.closed:
            self.close_reason = reason
            self.closed_by_peer = by_peer
            self._closed.set()
            log.info("closing the stream of node %s: %s", self.node, reason)

    async def next(self) -> wpb.MasterMessage | None:
        """The next message to send; None once the session is closed."""
        if self.closed:
            return None
        if not self._queue.empty():
            return self._queue.get_nowait()
        get = asyncio.ensure_future(self._queue.get())
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait((get, closed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not get.done():
                get.cancel()
        if get.done() and not get.cancelled() and not self.closed:
            return get.result()
        return None

    def __repr__(self) -> str:
        return f"Session({self.node!r}, id={self.id})"
