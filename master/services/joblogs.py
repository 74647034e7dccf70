"""Reading attempt logs for clients, optionally following them until the attempt is over. A
multi-node gang's attempt has one log per node part: they are read side by side, each chunk
naming its node (rank 0's is the attempt's plain log, the others' ``<attempt>@<node>.log``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from horus_core.errors import InvalidArgument, NotFound
from horus_core.model import Job
from master.services.access import Identity, check_job_access
from master.services.jobs import check_job_id
from master.services.logs import CHUNK, LogStore
from master.store.reads import Reader

POLL_S = 1.0  # a follower re-checks the job at least this often (wakes at once on new data/events)


@dataclass(frozen=True)
class LogPiece:
    job_id: str
    attempt: int
    offset: int
    data: bytes
    node: str = ""  # a gang's part ("" for an attempt on one node)


def _attempt_over(job: Job, attempt: int) -> bool:
    return job.attempt > attempt or not job.state.active


class LogReader:
    def __init__(self, read: Reader, logs: LogStore) -> None:
        self.read, self.logs = read, logs

    async def _job(self, job_id: str, caller: Identity | None) -> Job:
        row = await self.read.job(job_id)
        if row is None:
            raise NotFound(f"no job {job_id}")
        check_job_access(caller, row.job)
        return row.job

    async def _parts(self, job: Job, attempt: int) -> list[tuple[str, str]]:
        """``(file key, node name)`` of each part of the attempt: ``("", "")`` alone for an
        attempt on one node; a gang's rank 0 is ``("", its name)``."""
        others = await self.logs.parts(job.id, attempt)
        current = job.nodes if job.attempt == attempt else ()
        if not others and len(current) < 2:
            return [("", "")]
        rank0 = current[0] if current else await self.read.attempt_node(job.id, attempt) or ""
        names = [n for n in current[1:] if n not in others] + others
        return [("", rank0), *((n, n) for n in names if n != rank0)]

    async def _single_node(self, job: Job, attempt: int) -> str:
        if job.attempt == attempt:
            return job.node
        return await self.read.attempt_node(job.id, attempt) or ""

    async def _select(self, job: Job, attempt: int, node: str) -> list[tuple[str, str]]:
        parts = await self._parts(job, attempt)
        if not node:
            return parts
        if parts == [("", "")] and node == await self._single_node(job, attempt):
            return parts  # an attempt on one node: its node may be named too
        chosen = [p for p in parts if p[1] == node]
        if not chosen:
            ran = ", ".join(p[1] for p in parts if p[1]) or "one node"
            raise InvalidArgument(
                "node", f"attempt {attempt} of {job.id} has no part on {node!r} (ran on {ran})"
            )
        return chosen

    async def stream(
        self, job_id: str, attempt: int, offset: int, follow: bool, caller: Identity | None, node: str = ""
    ) -> AsyncIterator[LogPiece]:
        check_job_id(job_id)
        if attempt < 0:
            raise InvalidArgument("attempt", "must not be negative (0 = latest)")
        if offset < 0:
            raise InvalidArgument("offset", "must not be negative")
        job = await self._job(job_id, caller)
        if attempt > job.attempt:
            raise InvalidArgument("attempt", f"job {job_id} has {job.attempt} attempt(s)")
        while attempt == 0:
            if job.attempt > 0:
                attempt = job.attempt
            elif not follow or job.state.terminal:
                return
            else:
                await self.logs.wait(job_id, POLL_S)
                job = await self._job(job_id, caller)
        async for piece in self._follow(job, attempt, offset, follow, caller, node):
            yield piece

    async def _follow(
        self, job: Job, attempt: int, offset: int, follow: bool, caller: Identity | None, node: str
    ) -> AsyncIterator[LogPiece]:
        logs, parts = self.logs, await self._select(job, attempt, node)
        offsets = {key: offset for key, _ in parts}
        while True:
            read = False
            for key, name in parts:
                data = await logs.read(job.id, attempt, offsets[key], CHUNK, node=key)
                if data:
                    yield LogPiece(job.id, attempt, offsets[key], data, name)
                    offsets[key] += len(data)
                    read = True
            if read:
                continue
            if not follow:
                return
            if _attempt_over(job, attempt) and all(
                [await logs.size(job.id, attempt, k) <= offsets[k] for k in offsets]
            ):
                return
            await logs.wait(job.id, POLL_S)
            job = await self._job(job.id, caller)
            if not node:
                parts = await self._parts(job, attempt)  # (a part's first output makes its file)
                offsets = {key: offsets.get(key, offset) for key, _ in parts}
