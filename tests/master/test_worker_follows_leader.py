"""A worker among several masters and a frozen one (issue 39 defect 2): a master that accepts the
connection and answers nothing is left after a few seconds and not dialled again while a standby
still names it (its lease has not run out); the worker asks the standby again shortly and goes
to the new leader as soon as it is named. Before, it bounced back to the frozen master and
waited out a 10 s registration timeout each time, which put failovers past 15 s."""

from __future__ import annotations

import asyncio
import pathlib
import socket

import grpc
from master_fakes import gpu, running_master

from horus_core.gen import worker_pb2 as wpb
from master.ha import _Redirect
from worker.connection import Connection


class Frozen:
    """A listening socket that accepts and never answers (a SIGSTOPped master): counts dials."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.dials = 0
        self.conns: list[socket.socket] = []

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self.sock)
            self.dials += 1
            self.conns.append(conn)


class Registers:
    def __init__(self) -> None:
        self.registered = asyncio.Event()

    def register_message(self) -> wpb.WorkerMessage:
        return wpb.WorkerMessage(register=wpb.Register(name="w1", gpus=[gpu("w1", 0)], version="test"))

    def on_registered(self, msg: object) -> None:
        self.registered.set()

    def on_message(self, msg: object) -> None: ...
    def on_closed(self, why: str) -> None: ...


async def test_a_worker_waits_at_the_standby_instead_of_the_frozen_leader(tmp_path: pathlib.Path) -> None:
    frozen = Frozen()
    accept = asyncio.create_task(frozen.serve())
    redirect = _Redirect()
    redirect.leader = frozen.address  # the standby still reads the frozen leader's lease
    standby = grpc.aio.server()
    standby.add_generic_rpc_handlers((redirect,))
    port = standby.add_insecure_port("127.0.0.1:0")
    await standby.start()
    async with running_master(tmp_path) as leader:
        handler = Registers()
        conn = Connection(f"{frozen.address},127.0.0.1:{port}", handler, register_timeout_s=1.0)
        worker = asyncio.create_task(conn.run())
        try:
            await asyncio.sleep(3.0)  # left the frozen master (1 s), then asked the standby
            assert frozen.dials == 1, f"dialled the frozen master {frozen.dials} times"
            assert not handler.registered.is_set()
            redirect.leader = f"127.0.0.1:{leader.port}"  # the lease ran out: a new leader
            await asyncio.wait_for(handler.registered.wait(), 1.5)
            assert conn.target == f"127.0.0.1:{leader.port}" and frozen.dials == 1
        finally:
            conn.close()
            await asyncio.wait_for(worker, 10)
    accept.cancel()
    await standby.stop(None)
    for c in frozen.conns:
        c.close()
    frozen.sock.close()
