"""Leader election for horus-k8s replicas on a ``coordination.k8s.io/v1`` Lease.

One replica holds the Lease and schedules; the others retry every ``retry_s`` and take it over
once they have seen the same record, unchanged, for the lease's duration (their own clock, as
client-go does, so no clocks need agree). Every write carries the ``resourceVersion`` it read:
two candidates racing for one expired lease get one success and one 409.

Fencing: a leader's term ends ``renew_deadline_s`` after the start of its last successful renew,
which is before any standby can have waited out ``duration_s`` since seeing that renew; once it
ends, :attr:`Elector.leading` is False (the scheduler checks it before every write) and the work
task is cancelled. On a clean exit the lease is released (holder emptied) for an immediate
takeover. Defaults: 10 s lease, 8 s renew deadline, 2 s retry: a standby leads within about
12 s of the leader's death.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_core.kubeapi import JsonObj, Kube, KubeError, sleep_or

log = logging.getLogger("horus.k8s.lease")

API = "/apis/coordination.k8s.io/v1"


@dataclass(frozen=True)
class LeaseTimings:
    duration_s: float = 10.0
    renew_deadline_s: float = 8.0
    retry_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_s < self.renew_deadline_s < self.duration_s:
            raise ValueError("lease timings: need 0 < retry < renew deadline < duration")


def micro_time(now: dt.datetime | None = None) -> str:
    """Kubernetes' MicroTime: RFC 3339 in UTC with microseconds."""
    return (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: JsonObj) -> tuple[str, str, str]:
    spec = lease.get("spec") or {}
    rv = str((lease.get("metadata") or {}).get("resourceVersion", ""))
    return str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""), rv


class Elector:
    """Campaigns for the Lease ``namespace/name`` as ``identity``; see :meth:`run`."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings = LeaseTimings(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.t = timings
        self.clock = clock
        self._term_ends = 0.0  # the monotonic time our leadership ends without a renew
        self._seen: tuple[str, str, str] | None = None
        self._seen_at = 0.0
        self._seen_duration = timings.duration_s
        self.transitions = 0

    @property
    def path(self) -> str:
        return f"{API}/namespaces/{self.namespace}/leases"

    @property
    def leading(self) -> bool:
        """True while our term runs: check it before every write that only a leader may make."""
        return self.clock() < self._term_ends

    async def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the lease; True if we hold it now."""
        started = self.clock()
        try:
            ok = await asyncio.wait_for(self._round(started), timeout=self._round_timeout(started))
        except (TimeoutError, KubeError, OSError, ValueError) as exc:  # aiohttp errors are OSError
            log.debug("lease %s/%s: round failed: %s", self.namespace, self.name, exc)
            ok = False
        if ok:
            self._term_ends = started + self.t.renew_deadline_s
        return ok

    def _round_timeout(self, started: float) -> float:
        left = self._term_ends - started
        return max(0.5, left) if left > 0 else self.t.retry_s * 2

    async def _round(self, now: float) -> bool:
        try:
            lease = await self.kube.request("GET", f"{self.path}/{self.name}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            return await self._create()
        record = _record(lease)
        if record != self._seen:
            self._seen, self._seen_at = record, now
            spec = lease.get("spec") or {}
            self._seen_duration = float(spec.get("leaseDurationSeconds") or self.t.duration_s)
        holder = record[0]
        if holder and holder != self.identity and now < self._seen_at + self._seen_duration:
            return False  # held by another, not yet expired in our eyes
        return await self._update(lease, holder)

    def _spec(self, acquired: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.t.duration_s),
            "acquireTime": acquired,
            "renewTime": micro_time(),
            "leaseTransitions": transitions,
        }

    async def _create(self) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec(micro_time(), 0),
        }
        try:
            await self.kube.request("POST", self.path, body)
        except KubeError as exc:
            if exc.status == 409:
                return False  # another candidate created it first
            raise
        log.info("lease %s/%s: created, %s leads", self.namespace, self.name, self.identity)
        return True

    async def _update(self, lease: JsonObj, holder: str) -> bool:
        spec = lease.get("spec") or {}
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        acquired = str(spec.get("acquireTime") or "") if ours else micro_time()
        body = dict(lease) | {"spec": self._spec(acquired or micro_time(), transitions)}
        try:  # metadata.resourceVersion is the one we read: a 409 if anyone wrote since
            await self.kube.request("PUT", f"{self.path}/{self.name}", body)
        except KubeError as exc:
            if exc.status == 409:
                return False
            raise
        if not ours:
            self.transitions = transitions
            log.info("lease %s/%s: %s takes over from %r", self.namespace, self.name, self.identity, holder)
        return True

    async def release(self) -> None:
        """Empty the holder if it is still us, so a standby takes over at once."""
        if not self.leading:
            return
        self._term_ends = 0.0
        with contextlib.suppress(TimeoutError, KubeError, OSError, ValueError):
            lease = await asyncio.wait_for(self.kube.request("GET", f"{self.path}/{self.name}"), 5.0)
            if _record(lease)[0] != self.identity:
                return
            spec = dict(lease.get("spec") or {}) | {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(),
            }
            await asyncio.wait_for(
                self.kube.request("PUT", f"{self.path}/{self.name}", dict(lease) | {"spec": spec}), 5.0
            )
            log.info("lease %s/%s: released by %s", self.namespace, self.name, self.identity)

    async def run(self, stop: asyncio.Event, work: Callable[[], Awaitable[None]]) -> None:
        """Until ``stop``: campaign; while leading, run ``work()`` and renew; cancel it the moment
        the term ends unrenewed, then campaign again. Releases the lease on the way out."""
        try:
            while not stop.is_set():
                if await self.try_acquire_or_renew():
                    await self._lead(stop, work)
                elif await sleep_or(stop, self.t.retry_s):
                    break
        finally:
            await self.release()

    async def _lead(self, stop: asyncio.Event, work: Callable[[], Awaitable[None]]) -> None:
        task = asyncio.ensure_future(work())
        try:
            while not stop.is_set() and not task.done():
                if await sleep_or(stop, self.t.retry_s):
                    break
                while not await self.try_acquire_or_renew():
                    if not self.leading:
                        log.warning(
                            "lease %s/%s: %s lost it (no renew in time)",
                            self.namespace,
                            self.name,
                            self.identity,
                        )
                        return
                    if await sleep_or(
                        stop, min(self.t.retry_s / 4, max(0.0, self._term_ends - self.clock()))
                    ):
                        return
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class FencedKube(Kube):
    """``inner`` whose writes (anything but GET) are refused with a 503 unless ``leading()``:
    a replica that lost its lease cannot bind, patch or evict, whatever its loop was doing."""

    def __init__(self, inner: Kube, leading: Callable[[], bool]) -> None:
        super().__init__(inner.config, inner.agent)
        self._inner, self._leading = inner, leading

    def _fence(self, method: str, path: str) -> None:
        if method != "GET" and not self._leading():
            raise KubeError(503, f"{method} {path}: this replica does not hold the lease")

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> JsonObj:
        self._fence(method, path)
        return await self._inner.request(method, path, body, params)

    async def patch(self, path: str, body: Mapping[str, Any], strategic: bool = False) -> JsonObj:
        self._fence("PATCH", path)
        return await self._inner.patch(path, body, strategic)

    def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[JsonObj]:
        return self._inner.watch(path, params)
