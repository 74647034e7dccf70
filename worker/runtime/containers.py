"""Records of running Docker attempts under ``<state-dir>/containers`` and the ``docker kill`` the lease
watchdog stops them with, without the worker daemon or its event loop (blocking: call in a thread)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
from dataclasses import asdict, dataclass

from worker.files import safe_name
from worker.runtime.base import AttemptKey

KILL_TIMEOUT_S = 10.0  # for the `docker kill` calls of one check; the engine answers in well under 1 s


@dataclass(frozen=True, slots=True)
class ContainerRecord:
    job_id: str
    attempt: int
    container_id: str
    engine: str  # the engine address the worker used ("" = $DOCKER_HOST or the default socket)

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.job_id, self.attempt)


class ContainerRecords:
    """One JSON file per running Docker attempt, written by the daemon, read by the watchdog."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory

    def _path(self, key: AttemptKey) -> pathlib.Path:
        return self.directory / f"{safe_name(key.job_id)}.{key.attempt}.json"

    def save(self, key: AttemptKey, container_id: str, engine: str = "") -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = ContainerRecord(key.job_id, key.attempt, container_id, engine)
        tmp = self._path(key).with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)))
        os.replace(tmp, self._path(key))

    def remove(self, key: AttemptKey) -> None:
        self._path(key).unlink(missing_ok=True)

    def clear(self) -> None:
        """Forget every record (a starting daemon records again what it re-attaches)."""
        for path in self.directory.glob("*.json") if self.directory.is_dir() else ():
            path.unlink(missing_ok=True)

    def load(self) -> list[ContainerRecord]:
        """The readable records; a torn or foreign file is skipped."""
        out = []
        for path in sorted(self.directory.glob("*.json")) if self.directory.is_dir() else ():
            try:
                raw = json.loads(path.read_text())
                record = ContainerRecord(**raw)
            except (OSError, ValueError, TypeError):
                continue
            if isinstance(record.container_id, str) and record.container_id:
                out.append(record)
        return out


def docker_kill(orders: list[tuple[ContainerRecord, signal.Signals]]) -> list[tuple[bool, str]]:
    """Send each container's main process its signal with the ``docker`` CLI, all calls at once.
    Returns (sent, error) per order: False when the container is gone or not running, the CLI is
    missing, or the engine does not answer within KILL_TIMEOUT_S; never raises for those."""
    procs = [_spawn_kill(record, sig) for record, sig in orders]
    deadline = time.monotonic() + KILL_TIMEOUT_S
    return [_reap(proc, deadline) for proc in procs]


def _spawn_kill(record: ContainerRecord, sig: signal.Signals) -> subprocess.Popen[bytes] | str:
    env = dict(os.environ)
    if record.engine:
        env["DOCKER_HOST"] = record.engine
    argv = ["docker", "kill", "--signal", sig.name.removeprefix("SIG"), "--", record.container_id]
    try:
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    except (OSError, subprocess.SubprocessError) as exc:  # no CLI
        return str(exc) or type(exc).__name__


def _reap(proc: subprocess.Popen[bytes] | str, deadline: float) -> tuple[bool, str]:
    if isinstance(proc, str):
        return False, proc
    try:
        _, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return False, f"the engine did not answer within {KILL_TIMEOUT_S:g} s"
    if proc.returncode != 0:
        return False, err.decode(errors="replace").strip()
    return True, ""
