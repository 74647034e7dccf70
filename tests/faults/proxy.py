"""A TCP fault proxy on 127.0.0.1 between a worker and the master, run in a background thread.

Modes (:class:`Mode`): PASS forwards; DROP_UP / DROP_DOWN / DROP_BOTH read and discard the bytes
of one or both directions (the connections stay open, so neither side sees an error); PAUSE stops
reading both directions (bytes wait in the kernel's buffers, TCP stays alive) until the mode
changes; DELAY forwards every chunk ``delay_s`` after it arrived, in order. :meth:`reset` closes
every open connection (new ones are accepted). Dropping corrupts an HTTP/2 stream, so healing
from a drop resets the connections; healing from a pause or a delay does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time


class Mode(enum.Enum):
    PASS = "pass"
    DROP_UP = "drop-up"  # worker -> master lost
    DROP_DOWN = "drop-down"  # master -> worker lost
    DROP_BOTH = "drop-both"
    PAUSE = "pause"
    DELAY = "delay"


_DROPS = {Mode.DROP_UP: ("up",), Mode.DROP_DOWN: ("down",), Mode.DROP_BOTH: ("up", "down")}


class FaultProxy:
    def __init__(self, upstream_port: int, delay_s: float = 0.3) -> None:
        self.upstream_port = upstream_port
        self.delay_s = delay_s
        self.port = 0
        self.mode = Mode.PASS
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)

    # ------------------------------------------------------------------ from the test thread

    def start(self) -> FaultProxy:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def set_mode(self, mode: Mode) -> None:
        self._call(self._set_mode, mode)

    def heal(self) -> None:
        """Back to PASS; after a drop, the connections are reset (their streams are corrupt)."""
        dropped = self.mode in _DROPS
        self.set_mode(Mode.PASS)
        if dropped:
            self.reset()

    def reset(self) -> None:
        self._call(self._reset)

    def stop(self) -> None:
        self._call(self._reset)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _call(self, fn: object, *args: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn(*args)  # type: ignore[operator]
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        assert done.wait(10), "the proxy thread does not answer"

    # ------------------------------------------------------------------- in the proxy thread

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._changed = asyncio.Event()
        server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    def _set_mode(self, mode: Mode) -> None:
        self.mode = mode
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def _reset(self) -> None:
        for w in list(self._writers):
            with contextlib.suppress(Exception):
                w.transport.abort()
        self._writers.clear()

    async def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            cw.transport.abort()
            return
        self._writers |= {cw, uw}
        pumps = [
            asyncio.create_task(self._pump(cr, uw, "up")),
            asyncio.create_task(self._pump(ur, cw, "down")),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for w in (cw, uw):
            self._writers.discard(w)
            w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, way: str) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, writer))
        try:
            while True:
                while self.mode is Mode.PAUSE:
                    assert self._changed is not None
                    await self._changed.wait()
                data = await reader.read(65536)
                if not data:
                    return
                if way in _DROPS.get(self.mode, ()):
                    continue
                delay = self.delay_s if self.mode is Mode.DELAY else 0.0
                queue.put_nowait((time.monotonic() + delay, data))
        finally:
            sender.cancel()

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            while self.mode is Mode.PAUSE:
                assert self._changed is not None
                await self._changed.wait()
            writer.write(data)
            await writer.drain()
