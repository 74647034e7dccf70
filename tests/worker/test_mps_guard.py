"""The worker's sharing shell with real processes: MPS daemons run by a fake
``nvidia-cuda-mps-control`` on PATH (it records every command), and the memory watchdog reading
the simulated probe (what stand-in workloads write to their memory files)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import time
from collections.abc import Callable

import pytest

from horus_core.containment import Ending
from horus_core.model import JobSpec
from worker.gpu.base import GpuInfo, ProbeTarget
from worker.gpu.simulated import FallbackModel, SimulatedProbe
from worker.sharing.guard import SharingConfig, SharingGuard, Watched
from worker.sharing.modes import Sharing

FAKES = pathlib.Path(__file__).resolve().parents[1] / "fakes"
GPUS = [GpuInfo(f"GPU-g{i}", i, "Tesla V100-SXM2-16GB", 16384) for i in range(2)]
SPEC = JobSpec(("x",))
Stopped = tuple[tuple[str, int], str]


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "mps.jsonl"
    monkeypatch.setenv("PATH", f"{FAKES}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_RECORD", str(path))
    return path


def calls(path: pathlib.Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    return [{k: str(v) for k, v in json.loads(line).items()} for line in path.read_text().splitlines()]


def daemons(path: pathlib.Path) -> list[dict[str, str]]:
    return [c for c in calls(path) if c["argv"] == "['-f']"]


def quits(path: pathlib.Path) -> list[str]:
    """The pipe directories ``quit`` was sent to, in order."""
    return [c["pipe"] for c in calls(path) if c["stdin"].strip() == "quit"]


async def until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10.0
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def guard(tmp_path: pathlib.Path, stops: list[Stopped], config: SharingConfig) -> SharingGuard:
    probe = SimulatedProbe(GPUS, FallbackModel())
    return SharingGuard(
        config, GPUS, probe, tmp_path / "state",
        over_cap=lambda k, r: stops.append((k, r)), stop=lambda k, r: stops.append((k, r)),
    )  # fmt: skip


def env_of(mode: str, cap: int) -> dict[str, str]:
    return {"HORUS_SHARING": mode, "HORUS_GPU_MEMORY_CAP_MIB": str(cap)}


async def test_mps_life_start_on_first_share_per_gpu_restart_after_crash_quit_when_idle(
    tmp_path: pathlib.Path, record: pathlib.Path
) -> None:
    stops: list[Stopped] = []
    g = guard(tmp_path, stops, SharingConfig(Sharing.MPS))
    first = await g.prepare(("a", 1), SPEC, ("GPU-g0",), 4096)
    assert calls(record) == [] and dict(first.env) == env_of("mps", 4096)  # alone: no daemon
    second = await g.prepare(("b", 1), SPEC, ("GPU-g0",), 4096)
    env = dict(second.env)
    (daemon,) = calls(record)
    assert daemon["argv"] == "['-f']" and daemon["devices"] == "GPU-g0"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == daemon["pipe"] == str(tmp_path / "state" / "mps" / "0" / "pipe")
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert second.binds == ((daemon["pipe"], daemon["pipe"], False),)  # (a container sees the pipe)
    await g.prepare(("c", 1), SPEC, ("GPU-g1",), 2048)
    await g.prepare(("d", 1), SPEC, ("GPU-g1",), 2048)
    pipes = {c["devices"]: c["pipe"] for c in calls(record)}
    assert set(pipes) == {"GPU-g0", "GPU-g1"} and pipes["GPU-g0"] != pipes["GPU-g1"]  # never shared
    assert oct(os.stat(pipes["GPU-g1"]).st_mode & 0o777) == "0o700"

    pid = g.daemons["GPU-g0"].pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # the daemon of g0 dies
    await until(lambda: len(daemons(record)) == 3)
    assert stops == [(("b", 1), "the MPS daemon of GPU GPU-g0 died; re-queued")]  # its client
    restarted = daemons(record)[-1]
    assert restarted["devices"] == "GPU-g0" and restarted["pid"] != str(pid)

    for key in (("a", 1), ("b", 1)):
        g.ended(key)
    await until(lambda: quits(record) == [pipes["GPU-g0"]])
    await until(lambda: g.daemons["GPU-g0"].pid is None)
    assert g.daemons["GPU-g1"].pid is not None  # (its GPU still runs two jobs)
    await g.close()
    assert g.daemons["GPU-g1"].pid is None
    assert quits(record) == [pipes["GPU-g0"], pipes["GPU-g1"]]


async def test_a_daemon_that_cannot_start_leaves_its_jobs_time_sliced(tmp_path: pathlib.Path) -> None:
    g = guard(tmp_path, [], SharingConfig(Sharing.MPS, mps_control=str(tmp_path / "missing")))
    await g.prepare(("a", 1), SPEC, ("GPU-g0",), 4096)
    second = await g.prepare(("b", 1), SPEC, ("GPU-g0",), 4096)
    assert "CUDA_MPS_PIPE_DIRECTORY" not in dict(second.env) and g.book.running() == []
    await g.close()


async def test_hami_and_timeslice_environments(tmp_path: pathlib.Path) -> None:
    lib = tmp_path / "libvgpu.so"
    lib.write_bytes(b"")
    g = guard(tmp_path, [], SharingConfig(Sharing.HAMI, hami_lib=lib))
    env = dict((await g.prepare(("a", 2), SPEC, ("GPU-g0",), 3000)).env)
    assert env["LD_PRELOAD"] == str(lib) and env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "100"
    assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith("a-2.cache")
    alone = await g.prepare(("x", 1), JobSpec(("x",), exclusive=True), ("GPU-g1",), 3000)
    assert dict(alone.env) == env_of("hami", 0)  # (its GPUs to itself: no limits)
    t = guard(tmp_path, [], SharingConfig(Sharing.TIMESLICE))
    plain = await t.prepare(("a", 1), SPEC, ("GPU-g0",), 4096)
    assert dict(plain.env) == env_of("timeslice", 4096) and plain.binds == ()


async def test_the_watchdog_reads_workloads_memory_and_stops_one_over_its_cap(tmp_path: pathlib.Path) -> None:
    stops: list[Stopped] = []
    g = guard(tmp_path, stops, SharingConfig(Sharing.TIMESLICE))
    files = {k: tmp_path / f"{k}.mem" for k in ("a", "b")}
    files["a"].write_text("5000\n")
    files["b"].write_text("3000\n")
    for k in files:
        await g.prepare((k, 1), SPEC, ("GPU-g0",), 4096)
    targets = [
        ProbeTarget(k, 1, (100 + i,), ("GPU-g0",), SPEC, str(f)) for i, (k, f) in enumerate(files.items())
    ]
    watched = [Watched(t, 4096) for t in targets]
    await g.check(watched)
    assert [k for k, _ in stops] == [("a", 1)] and stops[0][1].startswith("GpuMemoryExceeded: used 5000 MiB")
    files["b"].write_text("3500\n")
    await g.check(watched)
    assert g.ended(("b", 1)) == Ending("", 3500, shared=True, neighbour_over=True)  # (saw a over its cap)
    assert g.ended(("a", 1)) == Ending("", 5000, shared=True, neighbour_over=False)
    assert g.ended(("z", 1)) == Ending()
    await g.close()
