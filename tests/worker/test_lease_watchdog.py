"""The lease watchdog (worker/lease.py) against real process groups and a real lease file (containers:
test_lease_docker.py)."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time

import pytest

from worker.lease import Watchdog, read_lease, write_lease
from worker.runtime.base import AttemptKey
from worker.runtime.containers import ContainerRecords
from worker.runtime.pgroups import GroupRecords

IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
)


def spawn(tmp: pathlib.Path, code: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline()  # running (and its handlers set)
    GroupRecords(tmp / "pgroups").save(AttemptKey("j", 1), proc.pid)
    return proc


def test_nothing_happens_before_the_deadline_or_without_a_lease(tmp_path: pathlib.Path) -> None:
    proc = spawn(tmp_path, "import time; print(1, flush=True); time.sleep(60)")
    try:
        dog = Watchdog(tmp_path)
        assert dog.check(time.monotonic()) == []  # no lease file yet
        write_lease(tmp_path, time.monotonic() + 30, 1.0)
        assert read_lease(tmp_path) is not None
        assert dog.check(time.monotonic()) == []
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_expired_lease_sigterm_then_sigkill_after_the_grace(tmp_path: pathlib.Path) -> None:
    proc = spawn(tmp_path, IGNORES_TERM)
    try:
        dog = Watchdog(tmp_path)
        now = time.monotonic()
        write_lease(tmp_path, now - 0.1, 2.0)
        assert dog.check(now) == [(proc.pid, signal.SIGTERM)]
        assert dog.check(now + 1.0) == []  # within the grace: it ignores SIGTERM and lives on
        assert proc.poll() is None
        assert dog.check(now + 2.0) == [(proc.pid, signal.SIGKILL)]
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_a_renewed_lease_resets_the_watchdog(tmp_path: pathlib.Path) -> None:
    proc = spawn(tmp_path, IGNORES_TERM)
    try:
        dog = Watchdog(tmp_path)
        now = time.monotonic()
        write_lease(tmp_path, now - 0.1, 2.0)
        assert dog.check(now) == [(proc.pid, signal.SIGTERM)]
        write_lease(tmp_path, now + 30, 2.0)  # renewed
        assert dog.check(now + 2.0) == []
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_missing_docker_cli_does_not_stop_the_watchdog(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `docker` there
    ContainerRecords(tmp_path / "containers").save(AttemptKey("c", 1), "0123456789abcdef")
    proc = spawn(tmp_path, IGNORES_TERM)
    try:
        dog = Watchdog(tmp_path)
        now = time.monotonic()
        write_lease(tmp_path, now - 0.1, 1.0)
        assert dog.check(now) == [(proc.pid, signal.SIGTERM)]  # the process groups still get theirs
        assert len(dog.errors) == 1 and "0123456789ab" in dog.errors[0]
        assert dog.check(now + 1.0) == [(proc.pid, signal.SIGKILL)]
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_container_records_skip_torn_files_and_clear(tmp_path: pathlib.Path) -> None:
    records = ContainerRecords(tmp_path / "containers")
    assert records.load() == []  # no directory yet
    records.save(AttemptKey("a/b", 2), "cid-1", "unix:///run/x.sock")
    (tmp_path / "containers" / "torn.json").write_text("{not json")
    (tmp_path / "containers" / "empty.json").write_text(
        '{"job_id": "x", "attempt": 1, "container_id": "", "engine": ""}'
    )
    assert [(r.key, r.container_id, r.engine) for r in records.load()] == [
        (AttemptKey("a/b", 2), "cid-1", "unix:///run/x.sock")
    ]
    records.remove(AttemptKey("a/b", 2))
    assert records.load() == []
    records.save(AttemptKey("c", 1), "cid-2")
    records.clear()
    assert records.load() == []
