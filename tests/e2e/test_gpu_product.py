"""``scripts/gpu-check``'s product section, run in CI on its twin: the same code, with a simulated
V100 and stand-in workloads instead of a GPU and PyTorch, and a fake ``nvidia-cuda-mps-control``
on PATH. Each mode's JSON line must say ok: the grower contained and run again alone, its
neighbour succeeded at its first attempt, the MPS daemon started, quit, and none left running."""

from __future__ import annotations

import importlib
import os
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
product = importlib.import_module("gpu_product")

pytestmark = pytest.mark.timeout(240)


async def test_the_product_section_passes_on_its_simulated_twin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'fakes'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_RECORD", str(tmp_path / "mps.jsonl"))
    lines: list[dict[str, Any]] = []
    ok = await product.check_product(
        lambda check, **f: lines.append({"check": check, **f}), product.simulated_jobs()
    )
    by_mode = {line["mode"]: line for line in lines}
    assert ok, lines
    assert set(by_mode) == {"timeslice", "mps"} and all(line["ok"] for line in lines)
    ts, mps = by_mode["timeslice"], by_mode["mps"]
    assert ts["contained"]["code"] == "GpuMemoryExceeded" and "watchdog" in ts["contained"]["reason"]
    assert "CUDA out of memory" in mps["first_attempt_tail"]  # (its MPS limit refused it)
    assert (
        mps["mps"]["daemons_started"] == mps["mps"]["daemons_quit"] >= 1 and mps["mps"]["left_running"] == []
    )
    assert ts["grower"]["ran_alone_after_steady"] and ts["steady"]["attempt"] == 1
    assert 4096 in ts["caps_seen_mib"]["grower"] and 4096 in ts["caps_seen_mib"]["steady"]


async def test_without_the_daemons_dependencies_it_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(product, "NEEDS", ("surely_not_installed_module",))
    lines: list[dict[str, Any]] = []
    assert not await product.check_product(lambda check, **f: lines.append(f), product.simulated_jobs())
    assert lines == [
        {"skipped": True, "why": "this Python lacks surely_not_installed_module: pip install -e . first"}
    ]
