"""Copy a container's stdout+stderr into the attempt's log file as it comes.

The runtime appends exactly the container's output (UTF-8, invalid bytes dropped) and nothing
else, so it knows how much of the engine's log it has copied: after a break in the stream the
engine's log is read again from the start and that many bytes are skipped. A restarted worker that
re-attaches takes the file's size as that count, so the file should hold only this attempt's
container output. (If the engine rotated the log away, the skip can lose or repeat some output.)

The engine can end a follow just before a stopped container's last lines (moby/moby#43860), so
once the follow ends the whole log is read once more, without following, and what the follow
missed is appended.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
from collections.abc import AsyncIterator, Iterable
from typing import BinaryIO

from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

log = logging.getLogger(__name__)
_MAX_RETRIES = 20


class LogPump:
    def __init__(self, container: DockerContainer, path: pathlib.Path, *, resume: bool = False) -> None:
        self._container = container
        self._path = path
        self._resume = resume
        self.written = 0  # bytes of the engine's log in the file

    async def run(self) -> None:
        """Follow the log until the container stops (the engine then ends the stream), then
        catch up with what the follow missed."""
        file = await asyncio.to_thread(self._open)
        try:
            for attempt in range(_MAX_RETRIES):
                try:
                    await self._follow(file)
                    return
                except (TimeoutError, DockerError, OSError) as err:
                    if isinstance(err, DockerError) and err.status == 404:
                        return  # the container is gone: nothing more to read
                    log.warning("log stream of %s broke (%s); resuming", self._container.id[:12], err)
                    await asyncio.sleep(min(0.2 * 2**attempt, 5.0))
        finally:
            await asyncio.to_thread(file.close)

    def _open(self) -> BinaryIO:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        file = self._path.open("ab")
        self.written = file.tell() if self._resume else 0
        return file

    async def _follow(self, file: BinaryIO) -> None:
        await self._copy(file, self._container.log(stdout=True, stderr=True, follow=True, timeout=None))
        await self._copy(file, _each(await self._container.log(stdout=True, stderr=True, follow=False)))

    async def _copy(self, file: BinaryIO, pieces: AsyncIterator[str]) -> None:
        """Append the engine's log text, read from its start, past the bytes already written."""
        skip = self.written
        async for text in pieces:
            data = text.encode("utf-8")
            if skip >= len(data):
                skip -= len(data)
                continue
            data, skip = data[skip:], 0
            await asyncio.to_thread(_append, file, data)
            self.written += len(data)


async def _each(pieces: Iterable[str]) -> AsyncIterator[str]:
    for piece in pieces:
        yield piece


def _append(file: BinaryIO, data: bytes) -> None:
    file.write(data)
    file.flush()
