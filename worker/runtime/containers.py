"""Records of running Docker attempts under ``<state-dir>/containers`` and the ``docker kill`` the lease
watchdog stops them with, without the worker daemon or its event loop (blocking: call in a thread)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from dataclasses import asdict, dataclass

from worker.files import safe_name
from worker.runtime.base import AttemptKey

KILL_TIMEOUT_S = 10.0  # one `docker kill` call; the engine answers in well under a second


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


def docker_kill(record: ContainerRecord, sig: signal.Signals) -> tuple[bool, str]:
    """Send ``sig`` to the container's main process with the ``docker`` CLI. Returns (sent, error):
    False when the container is gone or not running, the CLI is missing, or the engine does not
    answer in time; never raises for those."""
    env = dict(os.environ)
    if record.engine:
        env["DOCKER_HOST"] = record.engine
    argv = ["docker", "kill", "--signal", sig.name.removeprefix("SIG"), "--", record.container_id]
    try:
        done = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=KILL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:  # no CLI, timed out
        return False, str(exc) or type(exc).__name__
    if done.returncode != 0:
        return False, done.stderr.decode(errors="replace").strip()
    return True, ""
