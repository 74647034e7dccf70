"""The worker's side of a Slurm pilot (worker/slurm.py): its GPUs and the drain it asks for."""

from __future__ import annotations

import pytest

from worker.gpu.base import GpuInfo
from worker.slurm import Pilot, drain_timeout, only


def test_a_pilot_keeps_to_its_gpus() -> None:
    gpus = [GpuInfo(f"GPU-{i}", i, "Tesla V100", 16384) for i in range(4)]
    assert [g.uuid for g in only(gpus, (2, 3))] == ["GPU-2", "GPU-3"]
    assert only(gpus, ()) == gpus
    with pytest.raises(ValueError, match=r"\[7\]"):
        only(gpus, (1, 7))


def test_a_warned_pilot_drains_until_stop_s_before_its_end() -> None:
    p = Pilot("7", (), warn_s=300.0, stop_s=60.0)
    assert drain_timeout(end=1300.0, now=1000.0, pilot=p) == 240.0
    assert drain_timeout(end=1100.0, now=1000.0, pilot=p) == 40.0  # later than announced
    assert drain_timeout(end=1030.0, now=1000.0, pilot=p) == 0.0  # no time left: at once
    assert drain_timeout(end=9000.0, now=1000.0, pilot=p) == 240.0  # warned early (scancel --signal)
    assert drain_timeout(end=0.0, now=1000.0, pilot=p) == 240.0  # end unknown: as announced
