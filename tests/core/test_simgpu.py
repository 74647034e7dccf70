"""A stand-in workload's GPU memory on a simulated GPU: the limits MPS and HAMi-core would set,
refused growth (CUDA's error), the file the simulated probe reads, the moment it passes its cap."""

from __future__ import annotations

import pathlib

import pytest

from horus_core import workload
from horus_core.simgpu import GpuMemory, limit_of, parse_limit


def test_limits_as_mps_and_hami_core_write_them() -> None:
    assert parse_limit("4096M") == 4096 and parse_limit("4g") == 4096 and parse_limit("1073741824") == 1024
    assert parse_limit("lots") is None
    assert limit_of({"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "1=2G,0=4096M"}) == 4096
    assert limit_of({"CUDA_DEVICE_MEMORY_LIMIT_0": "3000m"}) == 3000 and limit_of({}) is None


def test_growth_beyond_the_limit_is_refused_with_cudas_error(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mem"
    mem = GpuMemory(str(path), limit_mib=4096, cap_mib=3000)
    assert mem.use(2000) and path.read_text() == "2000\n" and mem.over_cap_at is None
    assert mem.use(3500) and mem.over_cap_at is not None
    assert not mem.use(5000) and path.read_text() == "3500\n"
    out = capsys.readouterr()
    assert "over cap 3000 MiB at" in out.out and "torch.OutOfMemoryError: CUDA out of memory" in out.err


def test_the_workload_grows_evenly_and_stops_at_its_limit(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mem"
    monkeypatch.setenv("HORUS_SIM_GPU_MEMORY_FILE", str(path))
    monkeypatch.setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=6000M")
    args = ["--steps", "10", "--steps-per-s", "1000", "--gpu-memory-mib", "1000", "--grow-to-mib", "11000"]
    assert workload.main(args) == 1  # 1000 + 1000 per step: refused at step 6 (7000 > 6000)
    assert path.read_text() == "6000\n"
    monkeypatch.delenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
    assert workload.main(args) == 0 and path.read_text() == "11000\n"
