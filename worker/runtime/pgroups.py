"""Process groups of local attempts: the parent-death signal, /proc look-ups, and the records in the
state directory that let a restarted worker kill what its previous life left running (Linux)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from worker.files import safe_name
from worker.runtime.base import AttemptKey

PR_SET_PDEATHSIG = 1
# Runs as the child's first program, then execs the command in the same process (same pid, group
# and session). A preexec_fn would run Python between fork and exec in a process full of gRPC
# threads, which can crash the child; this runs none and lets subprocess use vfork.
_EXEC_WRAPPER = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    print(f"horus: cannot run {sys.argv[2]!r}: {exc.strerror}", file=sys.stderr, flush=True)
    os._exit(127)
"""


def die_with_parent(command: Sequence[str], parent_pid: int | None = None) -> list[str]:
    """``command`` wrapped so that it gets SIGKILL when the thread that forked it dies (Linux
    PR_SET_PDEATHSIG, kept across exec). Fork from the worker's event-loop thread: it lives as long
    as the worker. A child whose parent died before prctl exits at once."""
    parent = os.getpid() if parent_pid is None else parent_pid
    return [sys.executable, "-I", "-c", _EXEC_WRAPPER, str(parent), *command]


def resolve(program: str, cwd: pathlib.Path, path: str) -> None:
    """Raise FileNotFoundError unless ``program`` can be executed from ``cwd`` with ``$PATH``."""
    if not cwd.is_dir():
        raise FileNotFoundError(f"working directory {str(cwd)!r} does not exist")
    if os.sep in program:
        candidate = cwd / program
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            raise FileNotFoundError(f"{program!r} is not an executable file")
    elif shutil.which(program, path=path) is None:
        raise FileNotFoundError(f"{program!r} not found in PATH")


# ----------------------------------------------------------------------------------- /proc


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (the command name may hold spaces and parentheses)."""
    try:
        raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group, its leader first (one pass over /proc)."""
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return sorted(members, key=lambda p: (p != pgid, p))


def boot_id() -> str:
    try:
        return pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def kill_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a whole process group; False if it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


# -------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class GroupRecord:
    job_id: str
    attempt: int
    pgid: int
    start_time: int
    boot_id: str

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.job_id, self.attempt)

    def alive(self) -> bool:
        """Still our group: same boot, and the leader is the same process or the group has members
        (the kernel never reuses a pid as long as a group of that id exists)."""
        if self.boot_id != boot_id():
            return False
        leader = _stat_fields(self.pgid)
        if leader is not None and len(leader) > 19 and leader[0] != "Z":
            return int(leader[19]) == self.start_time
        return bool(group_members(self.pgid))  # leader gone (or a zombie): its group, if any, is ours


class GroupRecords:
    """One JSON file per live attempt under ``<state-dir>/pgroups`` (blocking: call in a thread)."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory

    def _path(self, key: AttemptKey) -> pathlib.Path:
        return self.directory / f"{safe_name(key.job_id)}.{key.attempt}.json"

    def save(self, key: AttemptKey, pgid: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = GroupRecord(key.job_id, key.attempt, pgid, start_time(pgid) or 0, boot_id())
        tmp = self._path(key).with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)))
        os.replace(tmp, self._path(key))

    def remove(self, key: AttemptKey) -> None:
        self._path(key).unlink(missing_ok=True)

    def load(self) -> list[tuple[pathlib.Path, GroupRecord | None]]:
        if not self.directory.is_dir():
            return []
        out: list[tuple[pathlib.Path, GroupRecord | None]] = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append((path, GroupRecord(**json.loads(path.read_text()))))
            except (OSError, ValueError, TypeError):
                out.append((path, None))
        return out

    def kill_orphans(self, keep: set[AttemptKey]) -> list[AttemptKey]:
        """SIGKILL every recorded group not in ``keep`` that is still alive; forget all but ``keep``."""
        killed = []
        for path, record in self.load():
            if record is not None and record.key in keep:
                continue
            if record is not None and record.alive() and kill_group(record.pgid, signal.SIGKILL):
                killed.append(record.key)
            path.unlink(missing_ok=True)
        return killed
