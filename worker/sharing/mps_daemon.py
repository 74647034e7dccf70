"""One GPU's MPS control daemon as a child of the worker: started in the foreground
(``nvidia-cuda-mps-control -f``, so the worker reaps it and sees it die), asked to quit with
``echo quit | nvidia-cuda-mps-control``, killed if it does not.

Its pipe and log directories are its GPU's own (``<state-dir>/mps/<index>/pipe`` and ``log``,
mode 0700), never shared between GPUs; the daemon sees only its GPU (``CUDA_VISIBLE_DEVICES``).
A Unix socket path must stay under 108 bytes: where the state directory is too deep for that,
the pipe directory is a fresh one under the system's temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pathlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from typing import IO

log = logging.getLogger(__name__)

CONTROL = "nvidia-cuda-mps-control"
READY_S = 10.0  # the daemon has this long to open its control pipe
QUIT_S = 10.0  # and to exit after "quit"
_SOCKET_MAX = 100  # bytes of a pipe directory path (+ "/control" and MPS' own names < 108)


def pipe_dirs(state_dir: pathlib.Path, index: int) -> tuple[pathlib.Path, pathlib.Path]:
    """(pipe, log) directories of GPU ``index``: one pair per GPU, created 0700."""
    base = state_dir / "mps" / str(index)
    pipe, logs = base / "pipe", base / "log"
    if len(str(pipe).encode()) > _SOCKET_MAX:
        pipe = pathlib.Path(tempfile.mkdtemp(prefix=f"horus-mps{index}-"))
    for d in (pipe, logs):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        d.chmod(0o700)
    return pipe, logs


def _open_log(path: pathlib.Path) -> IO[bytes]:
    return open(path, "ab")  # handed to the daemon, closed by the caller


class MpsDaemon:
    """The daemon of one GPU. ``on_crash(uuid)`` is called (on the loop) when it exits unasked."""

    def __init__(
        self,
        uuid: str,
        index: int,
        state_dir: pathlib.Path,
        on_crash: Callable[[str], None],
        control: str = CONTROL,
    ) -> None:
        self.uuid, self.index = uuid, index
        self.pipe_dir, self.log_dir = pipe_dirs(state_dir, index)
        self._control = control
        self._on_crash = on_crash
        self._proc: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._quitting = False
        self.starts = 0

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = self.uuid
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(self.pipe_dir)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(self.log_dir)
        return env

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def start(self) -> None:
        """Start it and wait until its control pipe exists; RuntimeError if it cannot."""
        binary = shutil.which(self._control) or self._control
        control = self.pipe_dir / "control"
        with contextlib.suppress(FileNotFoundError):
            control.unlink()  # (a dead daemon's pipe would read as ready)
        out = await asyncio.to_thread(_open_log, self.log_dir / "horus-daemon.log")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                binary, "-f", stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                env=self._env(), start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise RuntimeError(f"cannot start {self._control}: {exc}") from None
        finally:
            out.close()
        self._quitting = False
        self.starts += 1
        deadline = time.monotonic() + READY_S
        while not control.exists():
            if self._proc.returncode is not None or time.monotonic() > deadline:
                await self._kill()
                raise RuntimeError(f"the MPS daemon of GPU {self.uuid} did not start (see {self.log_dir})")
            await asyncio.sleep(0.05)
        self._watch = asyncio.create_task(self._supervise(self._proc), name=f"mps-{self.index}")
        log.info("MPS daemon of GPU %s started (pid %d, pipe %s)", self.uuid, self._proc.pid, self.pipe_dir)

    async def _supervise(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if not self._quitting and proc is self._proc:
            log.error("the MPS daemon of GPU %s exited unasked (status %s)", self.uuid, code)
            self._on_crash(self.uuid)

    async def quit(self) -> None:
        """``echo quit | nvidia-cuda-mps-control``; kill it if it has not exited after QUIT_S."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        self._quitting = True
        binary = shutil.which(self._control) or self._control
        try:
            client = await asyncio.create_subprocess_exec(
                binary, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, env=self._env(),
            )  # fmt: skip
            await asyncio.wait_for(client.communicate(b"quit\n"), QUIT_S)
            await asyncio.wait_for(proc.wait(), QUIT_S)
            log.info("MPS daemon of GPU %s quit", self.uuid)
        except (OSError, TimeoutError) as exc:
            log.warning("the MPS daemon of GPU %s did not quit (%s): killed", self.uuid, exc or "timeout")
            await self._kill()

    async def _kill(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        self._quitting = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()

    async def close(self) -> None:
        """At the worker's end: quit it (killed if it hangs) and stop supervising."""
        await self.quit()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
