"""The real agent and connection, over grpc.aio on 127.0.0.1, when a lease renewal is handled
between the lease watchdog's kill and the daemon seeing the attempt's exit (the race that made
``tests/faults`` ``pause`` flaky): the attempt must be reported as the lease case, not FAILED.

The runtime holds each attempt's exit until the test releases it, and its ``stop`` finds nothing
to signal (the watchdog got there first); the worker's clock is a FakeClock and its ticks are
off, so the renewal is the first event the worker handles after the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

from horus_core.gen import types_pb2
from horus_core.model import JobState
from horus_core.testing import FakeClock
from tests.worker.test_worker_agent import FakeMaster
from worker.agent import Agent, AgentConfig
from worker.gpu.base import GpuInfo
from worker.gpu.simulated import FallbackModel, SimulatedProbe, parse_fake_gpus, simulated_gpus
from worker.runtime.base import AttemptKey, ExitStatus, LaunchRequest, RunningAttempt

LEASE_S = 10.0


class KilledAttempt:
    """An attempt whose process the lease watchdog has already killed: ``stop`` is too late."""

    def __init__(self, key: AttemptKey) -> None:
        self.key = key
        self.exit: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()
        self.stops: list[str] = []

    def pids(self) -> list[int]:
        return []

    async def wait(self) -> ExitStatus:
        return await asyncio.shield(self.exit)

    async def stop(self, grace_s: float, reason: str) -> None:
        self.stops.append(reason)


class HeldRuntime:
    name = "held"

    def __init__(self) -> None:
        self.attempts: dict[AttemptKey, KilledAttempt] = {}

    async def start(self, request: LaunchRequest) -> RunningAttempt:
        attempt = self.attempts[request.key] = KilledAttempt(request.key)
        return attempt

    async def recover(self, log_dir: pathlib.Path) -> list[RunningAttempt]:
        return []

    async def remove_orphans(self, keep: set[AttemptKey]) -> list[AttemptKey]:
        return []

    async def close(self) -> None:
        return None


@pytest.fixture
async def master() -> AsyncIterator[FakeMaster]:
    m = await FakeMaster(lease_s=LEASE_S).start()
    yield m
    await m.stop()


@contextlib.asynccontextmanager
async def running_agent(
    master: FakeMaster, tmp_path: pathlib.Path
) -> AsyncIterator[tuple[FakeClock, HeldRuntime, list[GpuInfo], Agent]]:
    """A worker with one simulated GPU on ``master``: a FakeClock, ticks and watchdog off, the
    held runtime; shut down after."""
    clock, runtime = FakeClock(start=5000.0), HeldRuntime()
    gpus = simulated_gpus("w1", parse_fake_gpus("1"))
    config = AgentConfig("w1", f"127.0.0.1:{master.port}", tmp_path, poll_s=3600.0, watchdog=False)
    agent = Agent(config, gpus, SimulatedProbe(gpus, FallbackModel(), noise=0), runtime, clock=clock)
    task = asyncio.create_task(agent.run())
    try:
        yield clock, runtime, gpus, agent
    finally:
        agent.request_shutdown()
        await asyncio.wait_for(task, 20)


async def until(cond: Callable[[], bool], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_watchdog_kill_then_renewal_then_exit_reports_the_lease_case(
    master: FakeMaster, tmp_path: pathlib.Path
) -> None:
    async with running_agent(master, tmp_path) as (clock, runtime, gpus, agent):
        await master.wait_registered()
        master.assign("job-1", ("train",), [gpus[0].uuid])
        await master.update("job-1", types_pb2.JOB_STATE_RUNNING)
        master.renew = False
        clock.advance(LEASE_S + 1)  # the lease lapses; the watchdog kills the attempt meanwhile
        master.renew = True  # the next heartbeat (sent now, after the deadline) is renewed
        await until(lambda: clock.now() < agent.state.lease_deadline(), "no renewal came")
        killed = runtime.attempts[AttemptKey("job-1", 1)]
        killed.exit.set_result(ExitStatus(JobState.FAILED, 143, "killed by signal SIGTERM"))
        final = await master.update("job-1", types_pb2.JOB_STATE_CANCELLED, within=10.0)
        assert final.reason == "lease expired: stopped by the lease watchdog"
        assert types_pb2.JOB_STATE_FAILED not in master.updates("job-1")
        assert killed.stops and killed.stops[0].startswith("lease expired")  # the lapse stopped it too


async def test_a_heartbeat_after_an_unticked_deadline_says_fenced(
    master: FakeMaster, tmp_path: pathlib.Path
) -> None:
    """The master places nothing on a fenced worker: a heartbeat sent after the deadline says so
    even when no tick has run since (the worker would refuse the assignment anyway)."""
    async with running_agent(master, tmp_path) as (clock, _runtime, _gpus, agent):
        await master.wait_registered()
        master.renew = False
        clock.advance(LEASE_S + 1)
        await master.wait_for(lambda m: m.HasField("heartbeat") and m.heartbeat.fenced, within=10.0)
        assert agent.state.fenced
