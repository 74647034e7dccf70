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


def _fake_nvml() -> object:
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).with_name("fake_pynvml.py")
    spec = importlib.util.spec_from_file_location("fake_pynvml_slurm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_pynvml_slurm"] = module
    spec.loader.exec_module(module)
    return module


async def test_a_pilot_on_nvml_sees_and_reports_only_its_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML sees every GPU of the host; the pilot keeps to those of $SLURM_JOB_GPUS."""
    from worker.main import open_probe, parse_args, pilot_probe

    fake = _fake_nvml()
    uuids = [f"GPU-{i}0000000-1111-2222-3333-444444444444" for i in range(4)]
    fake.reset([fake.FakeGpu(u, used_bytes=(i + 1) << 30) for i, u in enumerate(uuids)])  # type: ignore[attr-defined]
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_JOB_GPUS", "1,3")
    args = parse_args(["--master", "127.0.0.1:1", "--slurm", "--slurm-warn-s", "30", "--slurm-stop-s", "10"])
    assert args.name == "slurm-77" and args.pilot == Pilot("77", (1, 3), 30.0, 10.0)
    probe, gpus, _ = await open_probe(args, nvml=fake)
    probe, gpus = await pilot_probe(args, probe, gpus)
    try:
        assert [(g.uuid, g.index) for g in gpus] == [(uuids[1], 1), (uuids[3], 3)]
        readings, _ = await probe.read([])
        assert sorted(r.uuid for r in readings) == [uuids[1], uuids[3]]
    finally:
        await probe.close()
        fake.reset([])  # type: ignore[attr-defined]


def test_slurm_flags_outside_a_job_or_wrong_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from worker.main import parse_args

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--master", "127.0.0.1:1", "--slurm"])
    assert exit_.value.code == 2 and "not inside a Slurm job" in capsys.readouterr().err
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    with pytest.raises(SystemExit):
        parse_args(["--master", "127.0.0.1:1", "--slurm", "--slurm-warn-s", "10", "--slurm-stop-s", "10"])
    assert "--slurm-stop-s" in capsys.readouterr().err
    assert parse_args(["--master", "127.0.0.1:1", "--slurm", "--name", "mine"]).name == "mine"
