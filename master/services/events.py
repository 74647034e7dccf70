"""Job events fanned out to watchers. Each watcher has a bounded queue; a slow one is dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from horus_core.errors import Unavailable
from horus_core.model import Job, JobState
from master.store.jobs import Change

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobEvent:
    job: Job
    previous: JobState | None  # None: the submission
    at: float
    reason: str


class Subscription:
    def __init__(self, job_id: str | None, owner: str | None, maxsize: int) -> None:
        self.job_id = job_id
        self.owner = owner
        self.dropped = False
        self._queue: asyncio.Queue[JobEvent | None] = asyncio.Queue(maxsize=maxsize)

    def wants(self, event: JobEvent) -> bool:
        if self.job_id is not None and event.job.id != self.job_id:
            return False
        return self.owner is None or event.job.spec.owner == self.owner

    def offer(self, event: JobEvent) -> bool:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            return False
        return True

    def end(self, dropped: bool) -> None:
        self.dropped = self.dropped or dropped
        while dropped and not self._queue.empty():  # a dropped watcher must reconnect anyway
            self._queue.get_nowait()
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def next(self) -> JobEvent | None:
        """The next event; None when the subscription ended (see ``dropped``)."""
        return await self._queue.get()


class EventBus:
    def __init__(self, *, max_subscribers: int = 256, queue_size: int = 1000) -> None:
        self._subs: set[Subscription] = set()
        self._max = max_subscribers
        self._queue_size = queue_size
        self._listeners: list[Callable[[JobEvent], None]] = []

    def add_listener(self, fn: Callable[[JobEvent], None]) -> None:
        """In-process listeners (called synchronously; must not block)."""
        self._listeners.append(fn)

    def subscribe(self, job_id: str | None = None, owner: str | None = None) -> Subscription:
        if len(self._subs) >= self._max:
            raise Unavailable(f"too many watchers ({self._max}); try again later")
        sub = Subscription(job_id, owner, self._queue_size)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

    def publish(self, event: JobEvent) -> None:
        for fn in self._listeners:
            try:
                fn(event)
            except Exception:
                log.exception("event listener failed")
        for sub in list(self._subs):
            if sub.wants(event) and not sub.offer(event):
                log.warning("dropping a slow watcher (job=%s owner=%s)", sub.job_id, sub.owner)
                self._subs.discard(sub)
                sub.end(dropped=True)

    def publish_changes(self, changes: Iterable[Change]) -> None:
        for c in changes:
            if c.state_changed:
                job = c.after.job
                self.publish(JobEvent(job, c.before.job.state, job.updated_at, job.reason))

    def close_all(self) -> None:
        for sub in list(self._subs):
            sub.end(dropped=False)
        self._subs.clear()

    def __len__(self) -> int:
        return len(self._subs)
