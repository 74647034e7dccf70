"""The real worker (agent, connection, ProcessRuntime, SimulatedProbe) against a tiny in-test master
that speaks docs/protocol.md over grpc.aio on 127.0.0.1: register, assignment, updates, logs,
progress, heartbeats, kill, reconnect after a master restart, fencing, and the CLI's signals."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from horus_core.gen import types_pb2, worker_pb2, worker_pb2_grpc
from horus_core.model import JobSpec, ProfileHints
from horus_core.wire import spec_to_pb
from worker.agent import Agent, AgentConfig
from worker.connection import Connection
from worker.gpu.simulated import (
    FallbackModel,
    SimulatedProbe,
    parse_fake_gpus,
    simulated_gpus,
    simulated_uuid,
)
from worker.runtime.process import ProcessRuntime

PY = sys.executable
RUNNING, SUCCEEDED, CANCELLED = (
    types_pb2.JOB_STATE_RUNNING,
    types_pb2.JOB_STATE_SUCCEEDED,
    types_pb2.JOB_STATE_CANCELLED,
)
Msg = worker_pb2.WorkerMessage
Context = grpc.aio.ServicerContext[worker_pb2.WorkerMessage, worker_pb2.MasterMessage]


def workload(steps: int, rate: float = 100.0) -> tuple[str, ...]:
    return (
        PY,
        "-m",
        "horus_core.workload",
        "--job-type",
        "ResNet-18 (batch size 32)",
        "--steps",
        str(steps),
        "--steps-per-s",
        str(rate),
        "--log-every",
        "5",
    )


class FakeMaster(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self, heartbeat_interval_s: float = 0.2, lease_s: float = 10.0, kill_grace_s: float = 0.0
    ) -> None:
        self.heartbeat_interval_s, self.lease_s, self.kill_grace_s = (
            heartbeat_interval_s,
            lease_s,
            kill_grace_s,
        )
        self.renew = True  # answer each heartbeat with a lease renewal, as the real master does
        self.registers: list[worker_pb2.Register] = []
        self.messages: list[Msg] = []
        self._outbox: asyncio.Queue[worker_pb2.MasterMessage | None] | None = None
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> FakeMaster:
        self.server = grpc.aio.server()
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        await self.server.start()
        return self

    async def stop(self) -> None:
        assert self.server is not None
        await self.server.stop(None)

    async def Connect(self, request_iterator: object, context: Context) -> None:  # type: ignore[override]
        first = await context.read()
        if not isinstance(first, Msg) or not first.HasField("register"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Register first")
            return
        self.registers.append(first.register)
        outbox = self._outbox = asyncio.Queue()
        registered = worker_pb2.Registered(
            heartbeat_interval_s=self.heartbeat_interval_s,
            lease_s=self.lease_s,
            epoch=len(self.registers),
            kill_grace_s=self.kill_grace_s,
        )
        await context.write(worker_pb2.MasterMessage(registered=registered))
        reader = asyncio.create_task(self._read(context))
        try:
            while True:
                getter = asyncio.create_task(outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                msg = getter.result()
                if msg is None:
                    return
                await context.write(msg)
        finally:
            reader.cancel()

    async def _read(self, context: Context) -> None:
        while True:
            msg = await context.read()
            if not isinstance(msg, Msg):
                return
            self.messages.append(msg)
            if msg.HasField("heartbeat") and self.renew and self._outbox is not None:
                renewal = worker_pb2.Registered(
                    heartbeat_interval_s=self.heartbeat_interval_s,
                    lease_s=self.lease_s,
                    renews_seq=msg.heartbeat.seq,
                    kill_grace_s=self.kill_grace_s,
                )
                self._outbox.put_nowait(worker_pb2.MasterMessage(registered=renewal))

    # ------------------------------------------------------------------------ test helpers

    def assign(
        self, job_id: str, command: tuple[str, ...], gpus: list[str], *, util: float | None = None
    ) -> None:
        hints = ProfileHints(util_avg=util, util_peak=util)
        spec = spec_to_pb(JobSpec(command=command, job_type="ResNet-18 (batch size 32)", hints=hints))
        a = worker_pb2.Assignment(job_id=job_id, attempt=1, spec=spec, gpus=gpus)
        self._send(worker_pb2.MasterMessage(assign=a))

    def kill(self, job_id: str, reason: str, attempt: int = 1) -> None:
        kill = worker_pb2.Kill(job_id=job_id, attempt=attempt, reason=reason)
        self._send(worker_pb2.MasterMessage(kill=kill))

    def _send(self, msg: worker_pb2.MasterMessage) -> None:
        assert self._outbox is not None, "no worker connected"
        self._outbox.put_nowait(msg)

    async def wait_for(self, pred: Callable[[Msg], bool], within: float = 15.0) -> Msg:
        deadline = time.monotonic() + within
        while True:
            for msg in self.messages:
                if pred(msg):
                    return msg
            assert time.monotonic() < deadline, "expected message did not arrive"
            await asyncio.sleep(0.02)

    async def wait_registered(self, count: int = 1, within: float = 15.0) -> worker_pb2.Register:
        deadline = time.monotonic() + within
        while len(self.registers) < count:
            assert time.monotonic() < deadline, "the worker did not register"
            await asyncio.sleep(0.02)
        return self.registers[count - 1]

    async def update(self, job_id: str, state: int, within: float = 15.0) -> worker_pb2.AttemptUpdate:
        msg = await self.wait_for(
            lambda m: m.HasField("update") and m.update.job_id == job_id and m.update.state == state, within
        )
        return msg.update

    def updates(self, job_id: str) -> list[int]:
        return [m.update.state for m in self.messages if m.HasField("update") and m.update.job_id == job_id]

    def log_text(self, job_id: str) -> str:
        """The log as the master would store it: append a chunk only at offset == size."""
        data = b""
        for m in self.messages:
            if m.HasField("log") and m.log.job_id == job_id and m.log.offset == len(data):
                data += m.log.data
        return data.decode()


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    m = await FakeMaster().start()
    yield m
    await m.stop()


class Worker:
    def __init__(self, tmp: pathlib.Path, port: int, name: str = "w1") -> None:
        self.gpus = simulated_gpus(name, parse_fake_gpus("2"))
        self.probe = SimulatedProbe(self.gpus, FallbackModel(), noise=0)
        config = AgentConfig(name, f"127.0.0.1:{port}", tmp, join_token="tok", grace_s=2.0, poll_s=0.05)
        self.agent = Agent(config, self.gpus, self.probe, ProcessRuntime(tmp), speed_of=self.probe.speed_of)
        self.task = asyncio.create_task(self.agent.run())

    async def stop(self) -> None:
        self.agent.request_shutdown()
        await asyncio.wait_for(self.task, 20)


@pytest.fixture
async def worker(tmp_path: pathlib.Path, master: FakeMaster) -> AsyncIterator[Worker]:
    w = Worker(tmp_path, master.port)
    yield w
    await w.stop()


async def test_register_assign_run_logs_progress_heartbeat_succeed(
    master: FakeMaster, worker: Worker
) -> None:
    reg = await master.wait_registered()
    assert reg.name == "w1" and reg.token == "tok" and list(reg.running) == []
    assert [g.uuid for g in reg.gpus] == [g.uuid for g in worker.gpus]
    assert {(g.model, g.gpu_type, g.memory_mib, g.healthy) for g in reg.gpus} == {
        ("Tesla V100-SXM2-16GB", "v100", 16384, True)
    }
    gpu0 = worker.gpus[0].uuid
    master.assign("job-1", workload(60), [gpu0])
    await master.update("job-1", RUNNING)
    final = await master.update("job-1", SUCCEEDED)
    assert final.exit_code == 0 and final.at > 0
    assert "done: 60 steps" in master.log_text("job-1")
    progress = await master.wait_for(lambda m: m.HasField("progress") and m.progress.step == 60)
    assert progress.progress.samples_per_s > 0 and progress.progress.loss > 0
    beat = await master.wait_for(
        lambda m: m.HasField("heartbeat") and any(j.job_id == "job-1" for j in m.heartbeat.jobs)
    )
    [stats] = beat.heartbeat.jobs
    assert (stats.gpu_uuid, stats.attempt, stats.util_sm, stats.mem_used_mib) == (gpu0, 1, 50.0, 2048)
    assert [r.job_id for r in beat.heartbeat.running] == ["job-1"]
    assert {g.uuid: g.util_sm for g in beat.heartbeat.gpus} == {gpu0: 50.0, worker.gpus[1].uuid: 0.0}
    # A copy of the same assignment is not run again: its final is sent again instead.
    master.assign("job-1", workload(60), [gpu0])
    deadline = time.monotonic() + 5
    while master.updates("job-1").count(SUCCEEDED) < 2:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert master.updates("job-1") == [RUNNING, SUCCEEDED, SUCCEEDED]


async def test_kill_cancels_and_bad_commands_fail(master: FakeMaster, worker: Worker) -> None:
    await master.wait_registered()
    master.assign("long", workload(100000, 20), [worker.gpus[0].uuid])
    await master.update("long", RUNNING)
    # Killed once it printed: its SIGTERM handler is in place by then.
    await master.wait_for(lambda m: m.HasField("log") and m.log.job_id == "long")
    master.kill("long", "preempted by policy horus")
    final = await master.update("long", CANCELLED)
    assert (final.exit_code, final.reason) == (143, "preempted by policy horus")
    assert "received SIGTERM" in master.log_text("long")
    master.assign("bad", ("/nonexistent/train",), [worker.gpus[1].uuid])
    failed = await master.update("bad", types_pb2.JOB_STATE_FAILED)
    assert failed.reason.startswith("cannot start:") and not failed.HasField("exit_code")


async def test_co_located_attempts_slow_down_through_the_speed_file(
    tmp_path: pathlib.Path, master: FakeMaster, worker: Worker
) -> None:
    await master.wait_registered()
    gpu0 = worker.gpus[0].uuid
    for job in ("a", "b"):  # 80 % + 80 % on one simulated GPU: each runs at 100 / 160 of its solo speed
        master.assign(job, workload(100000, 50), [gpu0], util=80.0)
    await master.wait_for(lambda m: m.HasField("heartbeat") and len(m.heartbeat.jobs) == 2)
    speed_file = tmp_path / "attempts" / "a" / "1" / "speed"
    deadline = time.monotonic() + 10
    while await asyncio.to_thread(speed_file.read_text) != "0.6250\n":
        assert time.monotonic() < deadline, "the speed file was not updated"
        await asyncio.sleep(0.05)
    await master.wait_for(lambda m: m.HasField("log") and b"speed 0.62" in m.log.data)
    beat = await master.wait_for(lambda m: m.HasField("heartbeat") and len(m.heartbeat.jobs) == 2)
    assert [g.util_sm for g in beat.heartbeat.gpus if g.uuid == gpu0] == [100.0]  # 160 % asked, capped
    assert sorted(j.util_sm for j in beat.heartbeat.jobs) == [50.0, 50.0]


async def test_reconnect_after_master_restart_reports_running_and_resends_finals(
    tmp_path: pathlib.Path,
) -> None:
    master = await FakeMaster().start()
    worker = Worker(tmp_path, master.port)
    try:
        await _reconnect_scenario(master, worker)
    finally:
        await worker.stop()


async def _reconnect_scenario(master: FakeMaster, worker: Worker) -> None:
    await master.wait_registered()
    gpu0, gpu1 = (g.uuid for g in worker.gpus)
    master.assign("short", workload(5), [gpu0])
    await master.update("short", SUCCEEDED)
    master.assign("long", workload(100000, 20), [gpu1])
    await master.update("long", RUNNING)
    await master.wait_for(lambda m: m.HasField("log") and m.log.job_id == "long")
    port = master.port
    await master.stop()
    await asyncio.sleep(0.5)

    master2 = await FakeMaster().start(port)
    try:
        reg = await master2.wait_registered()
        assert [(r.job_id, r.attempt) for r in reg.running] == [("long", 1)]
        assert [g.uuid for g in reg.gpus] == [gpu0, gpu1]
        # The registration itself carries the finals, so the master applies them before it
        # declares anything unreported lost.
        assert [(u.job_id, u.attempt, u.exit_code) for u in reg.finished] == [("short", 1, 0)]
        resent = await master2.update("short", SUCCEEDED)  # a final of the last 10 minutes, sent again
        assert resent.exit_code == 0
        await master2.update("long", RUNNING)  # idempotent re-statement of what runs
        await master2.wait_for(
            lambda m: m.HasField("heartbeat") and [r.job_id for r in m.heartbeat.running] == ["long"]
        )
        # Log chunks are replayed with their old boundaries: a master that kept nothing gets it all.
        await master2.wait_for(lambda m: m.HasField("log") and m.log.job_id == "long" and m.log.offset == 0)
        assert master2.log_text("long").startswith("workload 'ResNet-18 (batch size 32)'")
        master2.kill("long", "stale attempt")
        assert (await master2.update("long", CANCELLED)).reason == "stale attempt"
    finally:
        await master2.stop()


async def test_cut_off_longer_than_the_lease_stops_attempts(tmp_path: pathlib.Path) -> None:
    master = await FakeMaster(lease_s=1.0).start()
    w = Worker(tmp_path, master.port)
    try:
        await master.wait_registered()
        master.assign("long", workload(100000, 20), [w.gpus[0].uuid])
        await master.update("long", RUNNING)
        port = master.port
        await master.stop()
        log = tmp_path / "attempts" / "long" / "1" / "output.log"
        deadline = time.monotonic() + 10
        while "received SIGTERM" not in log.read_text():
            assert time.monotonic() < deadline, "the attempt was not stopped after the lease"
            await asyncio.sleep(0.05)
        master = await FakeMaster(lease_s=1.0).start(port)
        reg = await master.wait_registered()
        assert list(reg.running) == []
        assert next(u.reason for u in reg.finished if u.job_id == "long").startswith("lease expired")
        final = await master.update("long", CANCELLED)
        assert final.reason.startswith("lease expired")
    finally:
        await w.stop()
        await master.stop()


async def test_fenced_worker_refuses_work_until_a_renewal_ends_the_fence(tmp_path: pathlib.Path) -> None:
    """Issue 15 #4: a stall longer than the lease fences the worker; it refuses (never swallows)
    assignments meanwhile, and the first renewal after the stall makes it take work again."""
    master = await FakeMaster(lease_s=1.0, kill_grace_s=0.5).start()
    w = Worker(tmp_path, master.port)
    try:
        await master.wait_registered()
        master.assign("long", workload(100000, 20), [w.gpus[0].uuid])
        await master.update("long", RUNNING)
        master.renew = False  # the master stops hearing the worker; the stream stays up
        final = await master.update("long", CANCELLED)
        assert final.reason.startswith("lease expired")
        await master.wait_for(lambda m: m.HasField("heartbeat") and m.heartbeat.fenced)  # says so
        master.assign("during", workload(10), [w.gpus[1].uuid])
        refused = await master.update("during", CANCELLED)
        assert "fenced" in refused.reason and RUNNING not in master.updates("during")
        master.renew = True  # heard again
        await master.wait_for(lambda m: m.HasField("heartbeat") and m.heartbeat.seq > 0)
        deadline = time.monotonic() + 10
        while w.agent.state.fenced:
            assert time.monotonic() < deadline, "a renewed lease did not end the fence"
            await asyncio.sleep(0.02)
        master.assign("after", workload(10), [w.gpus[1].uuid])
        await master.update("after", RUNNING)
    finally:
        await w.stop()
        await master.stop()


# ------------------------------------------------------------------------------- the CLI


def start_cli(tmp: pathlib.Path, port: int, name: str = "cli-w") -> subprocess.Popen[bytes]:
    cmd = [
        PY,
        "-m",
        "worker.main",
        "--master",
        f"127.0.0.1:{port}",
        "--name",
        name,
        "--fake-gpus",
        "2",
        "--state-dir",
        str(tmp / name),
        "--grace-s",
        "2",
        "--log-level",
        "DEBUG",
    ]
    with open(tmp / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        return False


async def test_cli_sigterm_stops_attempts_sends_finals_and_exits_0(
    tmp_path: pathlib.Path, master: FakeMaster
) -> None:
    proc = start_cli(tmp_path, master.port)
    try:
        reg = await master.wait_registered(within=30)
        assert [g.uuid for g in reg.gpus] == [simulated_uuid("cli-w", 0), simulated_uuid("cli-w", 1)]
        master.assign("j", workload(100000, 20), [reg.gpus[0].uuid])
        await master.update("j", RUNNING)
        proc.send_signal(signal.SIGTERM)
        # (the worker gives the attempt its stop grace, 10 s, and winds down within 20 s: wait
        # that long, not the 15 s default, which a loaded 2-core CI machine once overran)
        final = await master.update("j", CANCELLED, within=25)
        assert (final.reason, final.exit_code) == ("worker shutting down", 143)
        assert await asyncio.to_thread(proc.wait, 20) == 0
    finally:
        proc.kill()
        proc.wait()


async def test_cli_sigkilled_worker_takes_its_attempts_along_and_comes_back(
    tmp_path: pathlib.Path, master: FakeMaster
) -> None:
    proc = start_cli(tmp_path, master.port)
    try:
        reg = await master.wait_registered(within=30)
        code = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"
        master.assign("j", (PY, "-c", code), [reg.gpus[1].uuid])
        await master.update("j", RUNNING)
        await master.wait_for(lambda m: m.HasField("log") and m.log.job_id == "j")
        job_pid = int(master.log_text("j").split()[1])
        assert alive(job_pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while alive(job_pid):
            assert time.monotonic() < deadline, "the attempt outlived its SIGKILLed worker"
            await asyncio.sleep(0.02)
        proc = start_cli(tmp_path, master.port)
        again = await master.wait_registered(2, within=30)
        assert list(again.running) == [] and [g.uuid for g in again.gpus] == [g.uuid for g in reg.gpus]
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 20)


async def test_cli_frozen_daemon_cannot_keep_an_attempt_past_its_lease(tmp_path: pathlib.Path) -> None:
    """Issue 15 #6: with the daemon SIGSTOPped, the lease watchdog (a separate process) stops the
    attempt within lease + kill grace + margin of the last renewed heartbeat."""
    lease, grace = 1.5, 0.5
    master = await FakeMaster(lease_s=lease, kill_grace_s=grace).start()
    proc = start_cli(tmp_path, master.port)
    try:
        reg = await master.wait_registered(within=30)
        code = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"
        master.assign("j", (PY, "-c", code), [reg.gpus[0].uuid])
        await master.update("j", RUNNING)
        await master.wait_for(lambda m: m.HasField("log") and m.log.job_id == "j")
        job_pid = int(master.log_text("j").split()[1])
        await master.wait_for(
            lambda m: m.HasField("heartbeat") and [r.job_id for r in m.heartbeat.running] == ["j"]
        )
        proc.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        while alive(job_pid):
            assert time.monotonic() - stopped_at < lease + grace + 1.0 + 1.0, "the attempt outlived its lease"
            await asyncio.sleep(0.02)
        assert time.monotonic() - stopped_at > 0.5  # it was the lease that ended it, not the stop
        proc.send_signal(signal.SIGCONT)
        final = await master.update("j", CANCELLED, within=20)
        assert final.reason.startswith("lease expired")
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        await asyncio.to_thread(proc.wait, 20)
        await master.stop()
    assert "Traceback" not in (tmp_path / "cli-w.log").read_text()


async def test_a_write_on_a_call_that_already_ended_is_an_ordinary_reconnect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 15 #11: after SIGCONT the call may have ended meanwhile; writing to it must end the
    session quietly ("RPC already finished" is not an error with a traceback)."""
    master = await FakeMaster().start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{master.port}")
    call = worker_pb2_grpc.WorkerServiceStub(channel).Connect()  # type: ignore[call-arg]
    await call.write(Msg(register=worker_pb2.Register(name="w")))
    assert isinstance(await call.read(), worker_pb2.MasterMessage)
    await master.stop()  # the master ends the call while the worker is not looking
    await call.code()
    queue: asyncio.Queue[Msg] = asyncio.Queue()
    queue.put_nowait(Msg(heartbeat=worker_pb2.Heartbeat(seq=1)))
    conn = Connection(f"127.0.0.1:{master.port}", handler=None)  # type: ignore[arg-type]
    why = await conn._write_loop(call, queue)
    assert "already ended" in why
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    await channel.close()
