"""``horus-sim --batch N``: the trace's first N jobs, all arriving at time 0; bad N and --jobs
together are refused with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus_core.sim.cli import main

R18 = "ResNet-18 (batch size 32)"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    lines = ["job_type,gpus,total_steps,arrival_s"]
    lines += [f"{R18},1,20000,{3600 * (i + 1)}" for i in range(4)]
    path = tmp_path / "four.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(trace: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    argv = ["--trace", str(trace), "--cluster", "v100:4", "--policies", "fifo", "--json", *extra]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_batch_takes_the_first_jobs_at_time_zero(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(trace, capsys, "--batch", "3")
    assert code == 0
    batch = json.loads(out)["fifo"]
    code, out, _ = run(trace, capsys, "--jobs", "3")
    spread = json.loads(out)["fifo"]
    assert batch["jobs"] == 3 and spread["jobs"] == 3
    # At once on 4 GPUs the three run side by side: the batch ends when one job does, while the
    # trace's arrivals an hour apart stretch the same jobs over two more hours.
    assert batch["makespan_h"] == pytest.approx(batch["avg_jct_h"])
    assert batch["avg_queue_h"] == 0.0
    assert spread["makespan_h"] == pytest.approx(batch["makespan_h"] + 2.0)


@pytest.mark.parametrize("n", ["-1", "0", "5"])
def test_batch_outside_the_trace_is_refused(trace: Path, capsys: pytest.CaptureFixture[str], n: str) -> None:
    code, out, err = run(trace, capsys, "--batch", n)
    assert code == 2 and out == ""
    assert "batch: must be within 1 and the trace's 4 jobs" in err


def test_batch_and_jobs_together_are_refused(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(trace, capsys, "--batch", "2", "--jobs", "3")
    assert code == 2 and "not both" in err
