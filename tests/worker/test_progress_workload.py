"""horus_core.progress (the job-side helper) and horus_core.workload (the stand-in training loop)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from horus_core import progress
from horus_core.workload import batch_size, loss_at
from worker.tails import LogTail, ProgressTail, parse_progress


def test_report_is_a_no_op_without_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    progress.report(1, loss=0.5)
    assert list(tmp_path.iterdir()) == []


def test_report_appends_json_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.jsonl"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    progress.report(1, loss=2.5, samples_per_s=640.0)
    progress.report(2)
    progress.report(3, loss=float("nan"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3]
    assert lines[0]["loss"] == 2.5 and lines[0]["samples_per_s"] == 640.0 and lines[0]["at"] > 0
    assert "loss" not in lines[1] and "loss" not in lines[2]


def test_speed(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv(progress.SPEED_ENV, raising=False)
    assert progress.speed() == 1.0
    path = tmp_path / "speed"
    monkeypatch.setenv(progress.SPEED_ENV, str(path))
    assert progress.speed() == 1.0  # missing file
    for text, expected in (("0.5\n", 0.5), ("garbage", 1.0), ("0", 1.0), ("-2", 1.0), ("inf", 1.0)):
        path.write_text(text)
        assert progress.speed() == expected


def test_workload_helpers() -> None:
    assert batch_size("ResNet-50 (batch size 128)") == 128
    assert batch_size("whatever") == 32
    assert loss_at(0) > loss_at(100) > loss_at(1000) > 0.1


def run_workload(tmp: pathlib.Path, *args: str, speed: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, progress.PROGRESS_ENV: str(tmp / "p.jsonl"), progress.SPEED_ENV: str(tmp / "speed")}
    if speed is not None:
        (tmp / "speed").write_text(speed)
    cmd = [sys.executable, "-m", "horus_core.workload", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def test_workload_runs_prints_and_reports(tmp_path: pathlib.Path) -> None:
    args = ("--job-type", "VAE (batch size 64)", "--steps", "20", "--steps-per-s", "200")
    done = run_workload(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("workload 'VAE (batch size 64)'") and lines[-1].startswith("done: 20 steps")
    assert sum(line.startswith("step ") for line in lines) == 2
    reports = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["step"] for r in reports] == [10, 20]
    assert reports[-1]["samples_per_s"] == pytest.approx(200 * 64)


def test_workload_fails_on_purpose(tmp_path: pathlib.Path) -> None:
    failed = run_workload(tmp_path, "--steps", "50", "--steps-per-s", "500", "--fail-at", "7")
    assert failed.returncode == 1 and "simulated failure at step 7" in failed.stderr
    coded = run_workload(tmp_path, "--steps", "5", "--steps-per-s", "500", "--exit-code", "4")
    assert coded.returncode == 4


def test_workload_slows_down_with_the_speed_file(tmp_path: pathlib.Path) -> None:
    start = time.monotonic()
    run_workload(tmp_path, "--steps", "20", "--steps-per-s", "100", speed="0.25")
    assert time.monotonic() - start >= 0.8  # 20 steps at 25 steps/s, not 0.2 s


def test_workload_exits_143_on_sigterm(tmp_path: pathlib.Path) -> None:
    cmd = [sys.executable, "-m", "horus_core.workload", "--steps", "100000", "--steps-per-s", "50"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("workload")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 143
    assert "received SIGTERM at step" in out


# ---------------------------------------------------------------- the worker's side: tails


def test_progress_tail_gives_the_latest_complete_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.jsonl"
    tail = ProgressTail(path)
    assert tail.read() is None
    path.write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5, "samples_per_s": 10}\n{"step": 3')
    latest = tail.read()
    assert latest is not None and (latest.step, latest.loss, latest.samples_per_s) == (2, 1.5, 10.0)
    assert tail.read() is None
    with path.open("ab") as fh:
        fh.write(b', "loss": 1.0}\nnot json\n')
    latest = tail.read()
    assert latest is not None and latest.step == 3
    assert parse_progress(b'{"step": "x"}') is None and parse_progress(b"[1]") is None
    assert parse_progress(b'{"step": 1, "loss": NaN}') is None


def test_log_tail_chunks_by_offset_and_replays_recent_chunks(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "out.log"
    tail = LogTail(path)
    assert tail.read() == []
    path.write_bytes(b"a" * (64 * 1024 + 10))
    chunks = tail.read()
    assert [(off, len(data)) for off, data in chunks] == [(0, 65536), (65536, 10)]
    with path.open("ab") as fh:
        fh.write(b"tail")
    assert tail.read() == [(65546, b"tail")]
    assert tail.read() == [] and not tail.pending()
    tail.rewind()
    assert tail.pending()
    replay = tail.read()
    assert [(off, len(data)) for off, data in replay] == [(0, 65536), (65536, 10), (65546, 4)]


def test_log_tail_bounds_each_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "out.log"
    path.write_bytes(b"x" * (10 * 64 * 1024))
    tail = LogTail(path)
    assert len(tail.read(max_new=4)) == 4
    assert tail.sent == 4 * 64 * 1024
