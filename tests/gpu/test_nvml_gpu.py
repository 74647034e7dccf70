"""NvmlProbe on a real NVIDIA GPU (marked ``gpu``; skipped where NVML or the driver is absent).

Run on an H200 on 2026-11-27 (``scripts/gpu-check``; docs/gpu-validation.md has the figures). The
first run found the attribution test killing a process group its shell did not lead.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import pathlib
import signal
import sys
from collections.abc import AsyncIterator

import pytest

from horus_core.model import JobSpec
from worker.gpu.base import ProbeTarget
from worker.gpu.nvml import NvmlProbe, ProbeUnavailable

pytestmark = pytest.mark.gpu
LOAD = pathlib.Path(__file__).with_name("cuda_load.py")


@pytest.fixture
async def probe() -> AsyncIterator[NvmlProbe]:
    try:
        p = await NvmlProbe.open()
    except ProbeUnavailable as err:
        pytest.skip(f"no NVML here: {err}")
    if not await p.gpus():
        await p.close()
        pytest.skip("NVML sees no GPU")
    yield p
    await p.close()


async def test_every_gpu_reads_sensibly(probe: NvmlProbe) -> None:
    infos = await probe.gpus()
    readings, _ = await probe.read([])
    assert [r.uuid for r in readings] == [g.uuid for g in infos]
    for info, r in zip(infos, readings, strict=True):
        assert info.uuid.startswith(("GPU-", "MIG-")) and info.memory_mib > 0 and info.model
        assert r.mem_total_mib == info.memory_mib and 0 <= r.mem_used_mib <= r.mem_total_mib
        assert 0 <= r.util_sm <= 100 and 0 <= r.util_mem <= 100
        assert r.healthy, f"{r.uuid} reads unhealthy: ecc={r.ecc_errors} xid={r.xid_events}"


async def test_a_child_process_is_attributed_to_its_attempt(probe: NvmlProbe) -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pytest.skip("no libcuda.so.1 (the driver's CUDA library)")
    gpu = (await probe.gpus())[0]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu.uuid}
    # sh is the attempt's process; the CUDA process is its child, as under ProcessRuntime / a container.
    shell = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        f"{sys.executable} {LOAD} --mib 1024 --seconds 20 --busy; exit 0",
        env=env,
        start_new_session=True,  # its own process group, so the finally below stops sh and its child
    )
    target = ProbeTarget("gpu-test", 1, (shell.pid,), (gpu.uuid,), JobSpec(command=("sh",)))
    seen = None
    try:
        for _ in range(30):
            await asyncio.sleep(0.5)
            _, procs = await probe.read([target])
            mine = [p for p in procs if p.pid == shell.pid and p.gpu_uuid == gpu.uuid]
            if mine and mine[0].mem_used_mib >= 1024 and (mine[0].util_sm or 0) > 0:
                seen = mine[0]
                break
    finally:
        if shell.returncode is None:
            os.killpg(shell.pid, signal.SIGTERM)  # sh and its CUDA child
        await asyncio.wait_for(shell.wait(), 30)
    assert seen is not None, "the CUDA child never showed up under the attempt's pid with memory and SM use"
