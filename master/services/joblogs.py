"""Reading attempt logs for clients, optionally following them until the attempt is over."""

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

    async def stream(
        self, job_id: str, attempt: int, offset: int, follow: bool, caller: Identity | None
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
        logs = self.logs
        while True:
            data = logs.read(job_id, attempt, offset, CHUNK)
            if data:
                yield LogPiece(job_id, attempt, offset, data)
                offset += len(data)
                continue
            if not follow:
                return
            over = _attempt_over(job, attempt)
            if over and logs.size(job_id, attempt) <= offset:
                return
            await logs.wait(job_id, POLL_S)
            job = await self._job(job_id, caller)
