"""The Docker runtime's log pump (worker/runtime/docker_logs.py) against an engine's awkward
moments, which a real engine cannot be made to show on demand: a follow that ends just before a
stopped container's last lines (moby/moby#43860), and a stream that breaks mid-way. The file must
end with exactly the container's output, once. (The real-engine tests are in
test_docker_runtime.py and tests/e2e/test_docker_gang*_e2e.py.)"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

from worker.runtime.docker_logs import LogPump

OUTPUT = ["step 1\n", "step 2\n", "héllo from rank 1\n", "done\n"]


class StoppedContainer:
    """A stopped container's log as the engine serves it: ``follow`` streams hand out the first
    ``shown`` pieces (then ``broken`` streams raise instead of ending); a plain read gives all."""

    def __init__(self, shown: int, broken: int = 0) -> None:
        self.id = "c" * 64
        self.shown, self.broken = shown, broken
        self.follows = 0

    async def _stream(self) -> AsyncIterator[str]:
        self.follows += 1
        for piece in OUTPUT[: self.shown]:
            yield piece
        if self.follows <= self.broken:
            raise DockerError(500, "stream broke")

    async def _all(self) -> list[str]:
        return list(OUTPUT)

    def log(self, *, stdout: bool, stderr: bool, follow: bool = False, **_: Any) -> Any:
        assert stdout and stderr
        return self._stream() if follow else self._all()


async def pumped(container: StoppedContainer, path: pathlib.Path, resume: bool = False) -> str:
    await LogPump(cast(DockerContainer, container), path, resume=resume).run()
    return await asyncio.to_thread(path.read_text, encoding="utf-8")


@pytest.mark.parametrize("shown", [0, 2, 3, len(OUTPUT)])
async def test_a_follow_that_ends_early_is_caught_up(tmp_path: pathlib.Path, shown: int) -> None:
    assert await pumped(StoppedContainer(shown), tmp_path / "a.log") == "".join(OUTPUT)


async def test_a_broken_stream_resumes_without_repeating(tmp_path: pathlib.Path) -> None:
    container = StoppedContainer(shown=2, broken=1)
    assert await pumped(container, tmp_path / "a.log") == "".join(OUTPUT)
    assert container.follows == 2


async def test_a_reattached_pump_appends_only_what_the_file_lacks(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a.log"
    path.write_text("".join(OUTPUT[:2]))  # what the worker wrote before it restarted
    assert await pumped(StoppedContainer(shown=3), path, resume=True) == "".join(OUTPUT)
