"""The master's responsiveness figures: the loop-lag monitor, the latency windows, and
``GetServerStats`` through a real server (docs/reliability.md, "Load")."""

from __future__ import annotations

import asyncio
import pathlib

import grpc
import pytest
from master_fakes import WAIT_S, FakeWorker, bearer, client_for, running_master, token_file

from horus_core.client import HorusClient
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from master.app import Master
from master.loopmon import LatencyWindow, LoopMonitor, percentile


def test_percentile_is_nearest_rank() -> None:
    ordered = [float(i) for i in range(1, 101)]
    assert percentile(ordered, 50) == 50.0
    assert percentile(ordered, 99) == 99.0
    assert percentile(ordered, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 99) == 0.0


def test_window_keeps_only_the_latest_samples() -> None:
    w = LatencyWindow(4)
    for s in (9.0, 0.001, 0.002, 0.003, 0.004):  # the 9 s sample falls out of the window
        w.add(s)
    snap = w.snapshot()
    assert (snap.samples, snap.total) == (4, 5)
    assert (snap.p50_ms, snap.p99_ms, snap.max_ms) == (2.0, 4.0, 4.0)
    one = LatencyWindow(1)
    one.add(-1.0)  # a clock step back counts as no lag, never a negative one
    assert one.snapshot().max_ms == 0.0
    with pytest.raises(ValueError):
        LatencyWindow(0)


class FakeLoop:
    """A fake monotonic clock and sleep: each sleep wakes ``late`` seconds after its time; once
    they are used up, sleeps block (``idle`` is set) so the monitor records nothing more."""

    def __init__(self, late: list[float]) -> None:
        self.t = 100.0
        self.late = late
        self.idle = asyncio.Event()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        if not self.late:
            self.idle.set()
            await asyncio.Future()  # forever
        self.t += seconds + self.late.pop(0)


async def test_monitor_records_how_late_each_wakeup_is() -> None:
    fake = FakeLoop([0.0, 0.25, 0.01, 0.0])
    mon = LoopMonitor(0.1, window=3, now=fake.now, sleep=fake.sleep)
    task = asyncio.create_task(mon.run())
    async with asyncio.timeout(WAIT_S):
        await fake.idle.wait()
    task.cancel()
    snap = mon.snapshot()
    assert (snap.samples, snap.total) == (3, 4)  # the first (0 s) fell out of the window
    assert snap.max_ms == pytest.approx(250.0) and snap.p50_ms == pytest.approx(10.0)
    with pytest.raises(ValueError):
        LoopMonitor(0.0)


async def test_server_stats_count_nodes_and_heartbeats(master: Master) -> None:
    async with client_for(master) as stub:
        before = await stub.GetServerStats(cpb.GetServerStatsRequest())
        assert before.nodes == 0 and before.heartbeat.total == 0
        assert before.loop_interval_s == pytest.approx(0.1)
        w = FakeWorker(master.port, "n1")
        await w.connect()
        for _ in range(3):
            await w.heartbeat(gpus=[pb.GpuStats(uuid=g.uuid, util_sm=50.0) for g in w.gpus])
        await w.barrier()  # all three handled
        after = await stub.GetServerStats(cpb.GetServerStatsRequest())
        assert (after.nodes, after.nodes_connected) == (1, 1)
        assert after.heartbeat.total == 3 and after.heartbeat.samples == 3
        assert 0 < after.heartbeat.p50_ms <= after.heartbeat.p99_ms <= after.heartbeat.max_ms
        await w.close()
    async with HorusClient.connect(f"127.0.0.1:{master.port}") as client:  # the SDK's view of the same
        stats = await client.server_stats(reset=True)
        assert stats.heartbeat.total == 3 and stats.nodes == 1 and stats.nodes_connected == 0
        assert stats.heartbeat.samples == 3  # answered before the reset
        fresh = await client.server_stats()
        assert (fresh.heartbeat.samples, fresh.heartbeat.total) == (0, 3)  # a new window; the count goes on


async def test_the_master_serves_its_monitors_lag(tmp_path: pathlib.Path) -> None:
    fake = FakeLoop([0.03, 0.002])
    mon = LoopMonitor(0.1, now=fake.now, sleep=fake.sleep)
    async with running_master(tmp_path, monitor=mon) as m, HorusClient.connect(f"127.0.0.1:{m.port}") as c:
        async with asyncio.timeout(WAIT_S):
            await fake.idle.wait()  # the master started the monitor, which took both samples
        stats = await c.server_stats()
    assert (stats.loop_lag.samples, stats.loop_lag.total) == (2, 2)
    assert stats.loop_lag.max_ms == pytest.approx(30.0) and stats.loop_lag.p50_ms == pytest.approx(2.0)


async def test_server_stats_are_for_admins_when_auth_is_on(tmp_path: pathlib.Path) -> None:
    tokens = token_file(tmp_path, "tok-alice alice", "tok-root root admin")
    async with running_master(tmp_path, auth_tokens=tokens, join_token="jt") as m, client_for(m) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetServerStats(cpb.GetServerStatsRequest(), metadata=bearer("tok-alice"))
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
        ok = await stub.GetServerStats(cpb.GetServerStatsRequest(), metadata=bearer("tok-root"))
        assert ok.nodes == 0
