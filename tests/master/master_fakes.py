"""Test helpers: a master on port 0 with a fake clock, client stubs, and a fake worker that
speaks the real stream protocol (docs/protocol.md) through real gRPC."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc

from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.gen import worker_pb2_grpc as wgrpc
from horus_core.testing import FakeClock
from master.app import Master
from master.auth import TokenTable
from master.config import MasterConfig
from master.loopmon import LoopMonitor

WAIT_S = 10.0  # upper bound for a message that must arrive (never a sleep)


def spec(**kw: Any) -> pb.JobSpec:
    kw.setdefault("command", ["sleep", "1"])
    kw.setdefault("gpus", 1)
    return pb.JobSpec(**kw)


def config(tmp_path: pathlib.Path, **overrides: Any) -> MasterConfig:
    base: dict[str, Any] = dict(
        db_path=tmp_path / "horus.db", listen="127.0.0.1:0", policy="fifo", shutdown_grace_s=0.5
    )
    base.update(overrides)
    return MasterConfig(**base)


@asynccontextmanager
async def running_master(
    tmp_path: pathlib.Path,
    clock: FakeClock | None = None,
    tokens: TokenTable | None = None,
    monitor: LoopMonitor | None = None,
    **overrides: Any,
) -> AsyncIterator[Master]:
    cfg = config(tmp_path, **overrides)
    async with Master(cfg, clock=clock or FakeClock(), tokens=tokens, monitor=monitor) as m:
        yield m


@asynccontextmanager
async def client_for(master: Master) -> AsyncIterator[cgrpc.HorusServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{master.port}") as channel:
        yield cgrpc.HorusServiceStub(channel)  # type: ignore[misc]


def gpu(node: str, i: int, mem: int = 16384) -> pb.Gpu:
    return pb.Gpu(
        uuid=f"GPU-{node}-{i}", node=node, index=i, model="Tesla V100", memory_mib=mem, healthy=True
    )


class FakeWorker:
    """Drives one worker stream by hand."""

    def __init__(
        self,
        port: int,
        name: str,
        n_gpus: int = 2,
        token: str = "",
        resume_epoch: int = 0,
        rack: str = "",
        runtime: str = "",
    ) -> None:
        self.port, self.name, self.token, self.rack, self.runtime = port, name, token, rack, runtime
        self.epoch = resume_epoch  # presented at the next registration (the same worker coming back)
        self.gpus = [gpu(name, i) for i in range(n_gpus)]
        self.channel: grpc.aio.Channel | None = None
        self.call: Any = None
        self._barriers = 0
        self.skipped: list[wpb.MasterMessage] = []
        self.advertise_addr = ""  # Register.advertise_addr ("": the master uses the peer address)
        self.slurm: pb.SlurmTag | None = None  # Register.slurm: a Slurm pilot's tag

    async def connect(
        self,
        running: tuple[tuple[str, int], ...] = (),
        finished: tuple[wpb.AttemptUpdate, ...] = (),
    ) -> wpb.Registered:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")
        self.call = wgrpc.WorkerServiceStub(self.channel).Connect()  # type: ignore[misc]
        await self.call.write(
            wpb.WorkerMessage(
                register=wpb.Register(
                    name=self.name,
                    gpus=self.gpus,
                    token=self.token,
                    version="test",
                    running=[wpb.AttemptRef(job_id=j, attempt=a) for j, a in running],
                    finished=list(finished),
                    resume_epoch=self.epoch,
                    advertise_addr=self.advertise_addr,
                    rack=self.rack,
                    runtime=self.runtime,
                    slurm=self.slurm,
                )
            )
        )
        first = await self.recv()
        assert first.WhichOneof("msg") == "registered", first
        self.epoch = first.registered.epoch
        return first.registered

    async def recv(self) -> wpb.MasterMessage:
        async with asyncio.timeout(WAIT_S):
            msg = await self.call.read()
        assert isinstance(msg, wpb.MasterMessage), f"stream ended: {msg!r}"
        return msg

    async def recv_kind(self, kind: str) -> Any:
        msg = await self.recv()
        while kind != "registered" and msg.WhichOneof("msg") == "registered":
            msg = await self.recv()  # a lease renewal: not what the test waits for
        assert msg.WhichOneof("msg") == kind, msg
        return getattr(msg, kind)

    async def expect(self, kind: str, job_id: str) -> Any:
        """The next message of ``kind`` for ``job_id``, where another master task (the scheduler
        loop's own liveness check and passes) may have sent it while the test waited on a barrier:
        the first such message a barrier read past (taken from :attr:`skipped`), else the next one
        of that kind on the stream."""
        for i, msg in enumerate(self.skipped):
            if msg.WhichOneof("msg") == kind and getattr(msg, kind).job_id == job_id:
                return getattr(self.skipped.pop(i), kind)
        got = await self.recv_kind(kind)
        assert got.job_id == job_id, got
        return got

    async def send(self, **kw: Any) -> None:
        await self.call.write(wpb.WorkerMessage(**kw))

    async def update(self, job_id: str, attempt: int, state: int, exit_code: int | None = None) -> None:
        upd = wpb.AttemptUpdate(job_id=job_id, attempt=attempt, state=state)  # type: ignore[arg-type]
        if exit_code is not None:
            upd.exit_code = exit_code
        await self.send(update=upd)

    async def log(self, job_id: str, attempt: int, offset: int, data: bytes) -> None:
        await self.send(log=wpb.AttemptLog(job_id=job_id, attempt=attempt, offset=offset, data=data))

    async def heartbeat(self, running: tuple[tuple[str, int], ...] = (), **kw: Any) -> None:
        await self.send(
            heartbeat=wpb.Heartbeat(running=[wpb.AttemptRef(job_id=j, attempt=a) for j, a in running], **kw)
        )

    async def barrier(self) -> None:
        """Return once the master has handled everything sent so far.

        The master handles a stream's messages in order and answers a RUNNING update of an
        unknown attempt with a Kill: when that Kill arrives, all earlier messages were handled.
        """
        self._barriers += 1
        await self.update("barrier", self._barriers, pb.JOB_STATE_RUNNING)
        while True:
            msg = await self.recv()
            if msg.WhichOneof("msg") == "kill" and msg.kill.job_id == "barrier":
                assert msg.kill.attempt == self._barriers
                return
            if msg.WhichOneof("msg") != "registered":  # lease renewals are not worth recording
                self.skipped.append(msg)

    async def close(self) -> None:
        """Half-close and read to the end: once the stream's status arrives the master has
        finished with it (the node is disconnected)."""
        if self.call is not None and not self.call.done():
            try:
                await self.call.done_writing()
                async with asyncio.timeout(WAIT_S):
                    while isinstance(await self.call.read(), wpb.MasterMessage):
                        pass
            except grpc.aio.AioRpcError:
                pass
        if self.channel is not None:
            await self.channel.close()

    async def crash(self) -> None:
        """Drop the stream without a goodbye."""
        if self.call is not None:
            self.call.cancel()
        if self.channel is not None:
            await self.channel.close()

    async def run_next(self) -> Any:
        """Take the next assignment and report its attempt RUNNING; returns the assignment once
        the master has handled the report."""
        a = await self.recv_kind("assign")
        await self.update(a.job_id, a.attempt, pb.JOB_STATE_RUNNING)
        await self.barrier()
        return a

    async def beat_jobs(
        self, gpu: str, *attempts: tuple[str, int], util_sm: float = 30.0, mem: int = 1000
    ) -> None:
        """A heartbeat with ``attempts`` running on ``gpu``, each using ``util_sm`` % and ``mem``
        MiB of it; returns once the master has handled it."""
        stats = [
            pb.JobGpuStats(job_id=j, attempt=n, gpu_uuid=gpu, util_sm=util_sm, mem_used_mib=mem)
            for j, n in attempts
        ]
        await self.heartbeat(running=attempts, jobs=stats)
        await self.barrier()


def token_file(tmp_path: pathlib.Path, *entries: str) -> pathlib.Path:
    """An ``--auth-tokens`` file of ``entries`` (``"TOKEN USER"``, or ``"TOKEN USER admin"``)."""
    path = tmp_path / "tokens"
    path.write_text("".join(f"{e}\n" for e in entries))
    return path


def bearer(token: str) -> tuple[tuple[str, str]]:
    """Call metadata presenting ``token``."""
    return (("authorization", f"Bearer {token}"),)
