"""The worker's stream pump (worker/connection.py ``Connection._pump``): when the master ends the
stream (an RPC error on read) in the same step as the worker closes its side, both tasks end at
once; the pump reports the master's reason and leaves no task exception unretrieved (asyncio
logs those with a traceback when the task is collected: a Docker test's worker log caught one)."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from horus_core.gen import worker_pb2
from worker import connection
from worker.connection import Connection


class EndsAtOnce:
    """A call whose read fails and whose write side closes together: ``lag`` loop steps apart
    after the gate opens (some lag puts both ends in the step the pump wakes up in)."""

    def __init__(self, lag: int = 0) -> None:
        self.gate = asyncio.Event()
        self.lag = lag

    async def read(self) -> worker_pb2.MasterMessage:
        await self.gate.wait()
        for _ in range(self.lag):
            await asyncio.sleep(0)
        raise ConnectionResetError("the master is shutting down")

    async def done_writing(self) -> None:
        await self.gate.wait()

    async def write(self, msg: worker_pb2.WorkerMessage) -> None:
        return None


class Quiet:
    def register_message(self) -> worker_pb2.WorkerMessage:
        return worker_pb2.WorkerMessage()

    def on_registered(self, msg: object) -> None: ...
    def on_message(self, msg: object) -> None: ...
    def on_closed(self, why: str) -> None: ...


async def pump_once(call: EndsAtOnce) -> BaseException | str:
    conn = Connection("127.0.0.1:1", Quiet())
    queue = asyncio.Queue[worker_pb2.WorkerMessage]()
    queue.put_nowait(connection._CLOSE)
    task = asyncio.create_task(conn._pump(call, queue))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    call.gate.set()  # both sides end in one step
    try:
        return await task
    except ConnectionResetError as exc:
        return exc


@pytest.mark.parametrize("lag", range(6))
def test_both_sides_ending_at_once_leave_no_exception_unretrieved(
    lag: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    out = asyncio.run(pump_once(EndsAtOnce(lag)))
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert isinstance(out, ConnectionResetError) or out == "closed by the worker"


def test_a_cancelled_pump_cancels_and_collects_both_tasks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")

    async def cancel_midway() -> int:
        conn, call = Connection("127.0.0.1:1", Quiet()), EndsAtOnce()
        before = len(asyncio.all_tasks())
        task = asyncio.create_task(conn._pump(call, asyncio.Queue()))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(asyncio.all_tasks()) - before

    assert asyncio.run(cancel_midway()) == 0  # (no reader or writer left behind)
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
