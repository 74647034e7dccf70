"""The worker's one stream to the master: dial out, register, read and write, reconnect with backoff.

Each session opens a fresh channel, writes the handler's Register, waits for Registered, then runs
a reader (every message to the handler) and a writer (one queue, in order). Messages sent while no
registered stream is up are dropped: the state machine re-sends what matters after the next
registration (RUNNING updates, recent finals, recent log chunks). A write that does not complete
within ``write_timeout_s`` ends the session, like a read error; so does a write on a call that
already ended (after a SIGSTOP/SIGCONT the master may have closed it meanwhile): an ordinary
reconnect, never an error traceback. Backoff between sessions goes from
0.2 s to 5 s and starts again after each successful registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from typing import Protocol

import grpc
from grpc import aio

from horus_core.client import Masters
from horus_core.gen import worker_pb2, worker_pb2_grpc
from horus_core.plane import LeaseGrant, ToWorker
from worker.messages import from_master, lease_grant

log = logging.getLogger(__name__)
_Call = aio.StreamStreamCall[worker_pb2.WorkerMessage, worker_pb2.MasterMessage]
MAX_MESSAGE = 16 * 1024 * 1024
REPEAT_WARNING_S = 60.0  # while the master stays unreachable, one warning a minute


class StreamHandler(Protocol):
    def register_message(self) -> worker_pb2.WorkerMessage: ...
    def on_registered(self, msg: LeaseGrant) -> None: ...
    def on_message(self, msg: ToWorker) -> None: ...
    def on_closed(self, why: str) -> None: ...


SILENT_HEARTBEATS, SILENCE_SLACK_S = 3, 2.0  # several masters: a master this silent is left
STANDBY_HOP_S = 0.1  # pause before dialling the master a standby named (or the next one listed)
# Several masters: a Register unanswered this long leaves the master (a frozen one accepts TCP
# connections and answers nothing); one left so is not dialled again for SHUN_SILENCES silence
# periods, even when a standby still names it (its lease has not run out yet): the worker asks
# the standby again every STANDBY_WAIT_S instead, and goes to the new leader once it is named
# (issue 39: a worker bouncing back to a frozen leader cost up to 10 s a time).
HA_REGISTER_TIMEOUT_S, SHUN_SILENCES, STANDBY_WAIT_S = 5.0, 2.0, 0.5


class Backoff:
    def __init__(self, initial_s: float = 0.2, max_s: float = 5.0, jitter: float = 0.1) -> None:
        self.initial_s, self.max_s, self.jitter = initial_s, max_s, jitter
        self._next = initial_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self.max_s, self._next * 2)
        return delay * (1.0 + random.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        self._next = self.initial_s


def retry_note(
    target: str, why: str, registered: bool, failures: int, down_s: float, delay_s: float, max_s: float
) -> str:
    """What the worker logs when a stream ends: that it keeps retrying, and how (``failures``:
    tries in a row that did not register, ``down_s`` since the first of them)."""
    if registered:
        return f"stream to {target} closed ({why}); reconnecting in {delay_s:.1f} s"
    if failures <= 1:
        return (
            f"cannot reach the master at {target} ({why}); retrying in {delay_s:.1f} s, then with "
            f"a backoff up to every {max_s:g} s until it answers (logged again once a minute)"
        )
    return (
        f"still cannot reach the master at {target} after {failures} tries in {down_s:.0f} s "
        f"({why}); retrying every {max_s:g} s at most, next in {delay_s:.1f} s"
    )


class ProtocolError(Exception):
    pass


class Connection:
    def __init__(
        self,
        target: str,
        handler: StreamHandler,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        backoff: Backoff | None = None,
        register_timeout_s: float = 10.0,
        write_timeout_s: float = 10.0,
    ) -> None:
        self._masters = Masters(target)  # one address, or several (docs/ha.md): the leader is followed
        self._silence_s = 10.0
        self._handler = handler
        self._credentials = credentials
        self._backoff = backoff or Backoff()
        self._register_timeout_s = register_timeout_s
        self.write_timeout_s = write_timeout_s
        self._queue: asyncio.Queue[worker_pb2.WorkerMessage] | None = None
        self._closing = False
        self._wake = asyncio.Event()
        self._call: _Call | None = None
        self._silent: dict[str, float] = {}  # masters left for silence: when (monotonic)
        self._held = False  # the last session ended at a standby that named a master left so

    @property
    def target(self) -> str:
        """The master this worker talks to now (or will dial next)."""
        return self._masters.current

    @property
    def registered(self) -> bool:
        return self._queue is not None

    def send(self, msg: worker_pb2.WorkerMessage) -> bool:
        """Queue a message on the registered stream; False (dropped) when there is none."""
        if self._queue is None:
            return False
        self._queue.put_nowait(msg)
        return True

    def backlog(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def flush(self, timeout_s: float) -> bool:
        """Wait until everything queued so far is written (or the stream is gone)."""
        queue = self._queue
        if queue is None:
            return False
        try:
            await asyncio.wait_for(queue.join(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def run(self) -> None:
        """Sessions until :meth:`close`."""
        failures, last_warned, since = 0, -REPEAT_WARNING_S, time.monotonic()
        while not self._closing:
            before = self.target
            why, registered = await self._session()
            if self._closing:
                break
            now = time.monotonic()
            failures = 0 if registered else failures + 1
            if failures <= 1:
                since = now
            # A standby named the leader (or another master is next): go there without the backoff.
            delay = STANDBY_HOP_S if self.target != before else self._backoff.next()
            if self._held:  # (a standby naming a master this worker left: ask it again soon)
                delay = STANDBY_WAIT_S
            quiet = failures > 1 and now - last_warned < REPEAT_WARNING_S
            if not quiet:
                last_warned = now
            text = retry_note(before, why, registered, failures, now - since, delay, self._backoff.max_s)
            nxt = f" (next: {self.target})" if self.target != before else ""
            log.log(logging.DEBUG if quiet else logging.WARNING, "%s%s", text, nxt)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def close(self) -> None:
        """End the stream politely once what is queued is written (a stream not registered yet is cut)."""
        self._closing = True
        self._wake.set()
        if self._queue is not None:
            self._queue.put_nowait(_CLOSE)
        elif self._call is not None:
            self._call.cancel()

    async def _session(self) -> tuple[str, bool]:
        """One stream: (why it ended, whether it got registered)."""
        channel = self._channel()
        self._call = call = worker_pb2_grpc.WorkerServiceStub(channel).Connect()  # type: ignore[call-arg]
        why, self._held = "closed", False
        several = len(self._masters.known) > 1
        wait_s = min(self._register_timeout_s, HA_REGISTER_TIMEOUT_S) if several else self._register_timeout_s
        try:
            await asyncio.wait_for(call.write(self._handler.register_message()), wait_s)
            first = await asyncio.wait_for(call.read(), wait_s)
            if not isinstance(first, worker_pb2.MasterMessage) or not first.HasField("registered"):
                raise ProtocolError("the master did not answer Register with Registered")
            self._queue = queue = asyncio.Queue[worker_pb2.WorkerMessage]()
            self._backoff.reset()
            log.info("registered with %s", self.target)
            grant = lease_grant(first.registered)
            self._silence_s = SILENT_HEARTBEATS * grant.heartbeat_interval_s + SILENCE_SLACK_S
            self._handler.on_registered(grant)
            if self._closing:
                queue.put_nowait(_CLOSE)
            why = await self._pump(call, queue)
        except aio.AioRpcError as exc:
            why = f"{exc.code().name}: {exc.details()}"
            at = self.target
            self._masters.after(exc)
            self._avoid_silent(at)
            if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                log.error("the master refused this worker: %s (check --join-token / TLS)", why)
        except asyncio.InvalidStateError:  # "RPC already finished": the call ended under us
            why = await _ended_why(call)
        except (TimeoutError, ProtocolError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            if several and isinstance(exc, TimeoutError):
                self._silent[self.target] = time.monotonic()  # (answers nothing: maybe frozen)
            self._masters.rotate()
            self._avoid_silent(None)
        except Exception as exc:  # never let one bad session end the worker's reconnect loop
            log.exception("stream to %s failed", self.target)
            why = f"{type(exc).__name__}: {exc}"
        finally:
            was_registered, self._queue, self._call = self._queue is not None, None, None
            call.cancel()
            await channel.close(None)
            if was_registered:
                self._handler.on_closed(why)
        return why, was_registered

    async def _pump(self, call: _Call, queue: asyncio.Queue[worker_pb2.WorkerMessage]) -> str:
        """Read and write until either side ends; why the stream ended (the reader's reason where
        both ended at once). Every outcome of both tasks is retrieved, also when this is
        cancelled: the master going away as the worker closes ends both in one step, and an
        exception left unretrieved is logged with a traceback when the task is collected."""
        reader = asyncio.create_task(self._read_loop(call))
        writer = asyncio.create_task(self._write_loop(call, queue))
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, writer):
                task.cancel()  # (a task already done stays as it ended)
            await asyncio.gather(reader, writer, return_exceptions=True)
        return (reader if reader in done else writer).result()

    async def _read_loop(self, call: _Call) -> str:
        # With several masters, one that answers nothing for a few heartbeats may be a stopped
        # leader another master has replaced: leave it (its TCP connection may look alive).
        silence = self._silence_s if len(self._masters.known) > 1 else None
        while True:
            try:
                msg = await asyncio.wait_for(call.read(), silence)
            except TimeoutError:
                self._silent[self.target] = time.monotonic()
                self._masters.rotate()
                self._avoid_silent(None)
                return f"the master sent nothing for {silence:.0f} s"
            if not isinstance(msg, worker_pb2.MasterMessage):  # grpc.aio.EOF
                return "the master ended the stream"
            try:
                plain = from_master(msg)  # (protobuf ends here: the handler gets plane types)
                if plain is not None:
                    self._handler.on_message(plain)
            except Exception:
                log.exception("handling %s from the master failed", msg.WhichOneof("msg"))

    async def _write_loop(self, call: _Call, queue: asyncio.Queue[worker_pb2.WorkerMessage]) -> str:
        while True:
            msg = await queue.get()
            try:
                if msg is _CLOSE:
                    await asyncio.wait_for(call.done_writing(), self.write_timeout_s)
                    return "closed by the worker"
                await asyncio.wait_for(call.write(msg), self.write_timeout_s)
            except TimeoutError:
                return f"a write took longer than {self.write_timeout_s:.0f} s"
            except asyncio.InvalidStateError:
                return await _ended_why(call)
            finally:
                queue.task_done()

    def _avoid_silent(self, at: str | None) -> None:
        """After a move to another master: if that one is a master left for silence lately, stay
        at ``at`` (the standby that named it) or move on to the next one that is not."""
        window = SHUN_SILENCES * self._silence_s
        now = time.monotonic()
        self._silent = {m: t for m, t in self._silent.items() if now - t < window}
        if self.target not in self._silent:
            return
        if at is not None and at not in self._silent:
            self._masters.current, self._held = at, True
            return
        for _ in range(len(self._masters.known) - 1):
            self._masters.rotate()
            if self.target not in self._silent:
                return

    def _channel(self) -> aio.Channel:
        options: Sequence[tuple[str, int]] = (
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.enable_retries", 0),
        )
        if self._credentials is not None:
            return aio.secure_channel(self.target, self._credentials, options=options)
        return aio.insecure_channel(self.target, options=options)


async def _ended_why(call: _Call) -> str:
    """Why a call that already finished ended, in words."""
    try:
        code, details = await call.code(), await call.details()
    except Exception as exc:  # the call's status cannot be read: say what we know
        return f"the stream had already ended ({type(exc).__name__})"
    return f"the stream had already ended ({code.name}: {details})"


_CLOSE = worker_pb2.WorkerMessage()
