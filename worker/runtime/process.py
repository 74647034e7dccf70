"""ProcessRuntime: an attempt as a local subprocess (the embedded default runtime).

The command runs without a shell in its own session (so its whole process group can be signalled),
with ``CUDA_VISIBLE_DEVICES`` set to the assigned GPU UUIDs, the worker's ``HORUS_*`` variables,
and the user's reserved variables stripped; stdout and stderr go to the attempt's log file. The
child gets SIGKILL as its parent-death signal, and each live group is recorded in the state
directory, so an attempt never outlives its worker: a restarted worker kills what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import signal
from typing import IO

from horus_core.model import JobState
from horus_core.validation import is_reserved_env, strip_reserved_env
from worker.runtime.base import AttemptKey, ExitStatus, LaunchRequest, RunningAttempt
from worker.runtime.pgroups import GroupRecords, die_with_parent, group_members, kill_group, resolve

log = logging.getLogger(__name__)


def build_env(request: LaunchRequest, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment and the user's, less reserved names, then the worker's additions."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_reserved_env(k)}
    env.update(strip_reserved_env(request.spec.env))
    env.update(request.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(request.gpu_uuids)
    return env


def exit_status(returncode: int, stop_reason: str | None) -> ExitStatus:
    """0 → SUCCEEDED, other codes and signals → FAILED, anything after stop() → CANCELLED."""
    code = returncode if returncode >= 0 else 128 - returncode
    if returncode >= 0:
        how = f"exited with code {returncode}"
    else:
        try:
            how = f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    if stop_reason is not None:
        return ExitStatus(JobState.CANCELLED, code, stop_reason)
    if returncode == 0:
        return ExitStatus(JobState.SUCCEEDED, 0, how)
    return ExitStatus(JobState.FAILED, code, how)


class ProcessAttempt:
    """One running attempt; its process group id is its leader's pid."""

    def __init__(self, key: AttemptKey, proc: asyncio.subprocess.Process, records: GroupRecords) -> None:
        self.key = key
        self._proc = proc
        self._records = records
        self._stop_reason: str | None = None
        self._done: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()
        self._reaper = asyncio.create_task(self._reap(), name=f"reap-{key.job_id}-{key.attempt}")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def pids(self) -> list[int]:
        if self._done.done():
            return []
        return group_members(self._proc.pid) or [self._proc.pid]

    async def wait(self) -> ExitStatus:
        return await asyncio.shield(self._done)

    async def stop(self, grace_s: float, reason: str) -> None:
        if self._stop_reason is None and not self._done.done():
            self._stop_reason = reason
        if self._done.done():
            return
        kill_group(self._proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self._done), timeout=max(0.0, grace_s))
        except TimeoutError:
            log.info("attempt %s/%d ignored SIGTERM for %.1f s: SIGKILL", *_k(self.key), grace_s)
            kill_group(self._proc.pid, signal.SIGKILL)
            await asyncio.shield(self._done)

    async def _reap(self) -> None:
        returncode = await self._proc.wait()
        stopped = self._stop_reason  # a stop asked for after the exit did not end the attempt
        # Whatever the leader left behind in its group dies with it.
        kill_group(self._proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self._records.remove, self.key)
        self._done.set_result(exit_status(returncode, stopped))


class ProcessRuntime:
    """The Runtime for jobs without an image. ``state_dir`` keeps the records of live groups."""

    name = "process"

    def __init__(self, state_dir: pathlib.Path) -> None:
        self._records = GroupRecords(state_dir / "pgroups")

    async def start(self, request: LaunchRequest) -> RunningAttempt:
        spec = request.spec
        if spec.image:
            raise RuntimeError(
                f"this worker runs jobs as local processes (--runtime process); image {spec.image!r} "
                "needs a worker started with --runtime docker"
            )
        if not spec.command:
            raise RuntimeError("empty command")
        cwd = pathlib.Path(spec.workdir) if spec.workdir else request.log_path.parent
        env = build_env(request)
        out = await asyncio.to_thread(_open_log, request.log_path)
        try:
            await asyncio.to_thread(resolve, spec.command[0], cwd, env.get("PATH", os.defpath))
            proc = await asyncio.create_subprocess_exec(
                *die_with_parent(spec.command),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        finally:
            out.close()
        try:
            await asyncio.to_thread(self._records.save, request.key, proc.pid)
        except OSError as exc:  # the attempt runs; only a crash-restart could miss it
            log.warning("cannot record process group of %s/%d: %s", *_k(request.key), exc)
        return ProcessAttempt(request.key, proc, self._records)

    async def recover(self, log_dir: pathlib.Path) -> list[RunningAttempt]:
        """Local processes cannot be re-attached: they die with their worker (parent-death signal)."""
        return []

    async def remove_orphans(self, keep: set[AttemptKey]) -> list[AttemptKey]:
        return await asyncio.to_thread(self._records.kill_orphans, keep)

    async def close(self) -> None:
        return None


def _open_log(path: pathlib.Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "ab")  # handed to the child, closed by the caller


def _k(key: AttemptKey) -> tuple[str, int]:
    return key.job_id, key.attempt
