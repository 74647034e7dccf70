"""DockerAttempt's final status when a stop and the container's own exit race.

A container's end is known (the engine's wait returns) some time before :meth:`wait` resolves:
the log stream is drained, the container inspected and removed first (up to 10 s). A stop asked
for in that window (a master's Kill) did not end the container, so its own result stands. The
engine's moments are held with events here (a real engine cannot be paused between them; the
real-engine tests are in test_docker_runtime.py).
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from typing import Any, cast

from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

from horus_core.model import JobState
from worker.runtime.base import AttemptKey
from worker.runtime.docker import DockerAttempt

KEY = AttemptKey("job-1", 1)


class SteppedContainer:
    """The calls DockerAttempt makes, answered as an engine would; ``inspected`` holds the
    inspection that follows the exit, ``inspecting`` and ``stop_asked`` say a call came."""

    def __init__(self) -> None:
        self.id = "c" * 64
        self.code: int | None = None
        self.exited = asyncio.Event()
        self.inspected = asyncio.Event()
        self.inspecting = asyncio.Event()
        self.stop_asked = asyncio.Event()

    def exit(self, code: int) -> None:
        self.code = code
        self.exited.set()

    async def _lines(self) -> AsyncIterator[str]:
        yield "hello\n"
        await self.exited.wait()

    async def _all(self) -> list[str]:
        return ["hello\n"]

    def log(self, *, follow: bool = False, **_: Any) -> Any:
        return self._lines() if follow else self._all()

    async def wait(self) -> dict[str, int]:
        await self.exited.wait()
        assert self.code is not None
        return {"StatusCode": self.code}

    async def show(self) -> dict[str, Any]:
        self.inspecting.set()
        await self.inspected.wait()
        return {"State": {"OOMKilled": False}}

    async def stop(self, t: int) -> None:
        self.stop_asked.set()
        if self.exited.is_set():
            raise DockerError(304, "container already stopped")
        self.exit(143)

    async def kill(self) -> None:
        if self.exited.is_set():
            raise DockerError(409, "container is not running")
        self.exit(137)

    async def delete(self, force: bool) -> None:
        return None


def attempt(container: SteppedContainer, tmp_path: pathlib.Path) -> DockerAttempt:
    return DockerAttempt(cast(DockerContainer, container), KEY, tmp_path / "log", pid=0)


async def test_a_stop_after_the_container_exited_keeps_its_own_result(tmp_path: pathlib.Path) -> None:
    container = SteppedContainer()
    handle = attempt(container, tmp_path)
    container.exit(0)  # it finished on its own...
    await container.inspecting.wait()  # ...and the attempt saw it
    assert not handle.done.done()
    stop = asyncio.create_task(handle.stop(5.0, "killed by the master"))  # a Kill in the window
    await container.stop_asked.wait()
    container.inspected.set()
    status = await handle.wait()
    await stop
    assert (status.state, status.exit_code) == (JobState.SUCCEEDED, 0)
    assert (tmp_path / "log").read_text() == "hello\n"


async def test_a_stop_before_the_exit_is_cancelled_with_its_reason(tmp_path: pathlib.Path) -> None:
    container = SteppedContainer()
    container.inspected.set()
    handle = attempt(container, tmp_path)
    await handle.stop(5.0, "killed by the master")
    status = await handle.wait()
    assert (status.state, status.exit_code) == (JobState.CANCELLED, 143)
    assert status.reason == "killed by the master"
