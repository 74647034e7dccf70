"""A collection of the apiserver mirrored here: list, then watch from the list's resourceVersion;
a watch that ends is resumed from the last version seen, one that is too old (410 Gone) lists
again. Every change sets ``changed`` (the scheduler's wake-up). The apiserver stays the source of
truth: a restart lists everything again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from horus_core.kubeapi import JsonObj, Kube, KubeError, sleep_or

log = logging.getLogger("horus.k8s")
WATCH_S = 240
RETRY_S = 1.0


def key_of(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ""
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Mirror:
    """The objects of ``path`` (a list URL) by ``NAMESPACE/NAME``, kept up to date by :meth:`run`."""

    def __init__(
        self, kube: Kube, path: str, changed: asyncio.Event, selector: str = "", labels: str = ""
    ) -> None:
        self.kube, self.path, self.changed, self.selector, self.labels = kube, path, changed, selector, labels
        self.objects: dict[str, JsonObj] = {}
        self.synced = asyncio.Event()  # set once the first list is in
        self.missing = False  # the collection is not served (a CRD not installed): empty
        self._version = ""

    def _params(self) -> dict[str, str]:
        out = {"fieldSelector": self.selector} if self.selector else {}
        return out | ({"labelSelector": self.labels} if self.labels else {})

    async def relist(self) -> None:
        try:
            got = await self.kube.request("GET", self.path, params=self._params())
        except KubeError as exc:
            if exc.status != 404:
                raise
            self.missing, self.objects = True, {}
            self.synced.set()
            return
        self.objects = {key_of(o): o for o in got.get("items") or [] if isinstance(o, dict)}
        self._version = str((got.get("metadata") or {}).get("resourceVersion") or "")
        self.synced.set()
        self.changed.set()

    async def run(self, stop: asyncio.Event) -> None:
        """List and watch until ``stop``; errors are logged and retried (never fatal)."""
        while not stop.is_set():
            try:
                if not self._version:
                    await self.relist()
                    if self.missing:  # (re-checked now and then: a CRD may be installed later)
                        await sleep_or(stop, 30.0)
                        self.missing = False
                        continue
                await self._watch()
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.status == 410:
                    self._version = ""
                    continue
                log.warning("watch %s: %s", self.path, exc)
                await sleep_or(stop, RETRY_S)
            except (OSError, TimeoutError, ValueError) as exc:
                log.warning("watch %s: %s", self.path, exc)
                await sleep_or(stop, RETRY_S)

    async def _watch(self) -> None:
        params = self._params() | {
            "resourceVersion": self._version,
            "timeoutSeconds": str(WATCH_S),
            "allowWatchBookmarks": "true",
        }
        async for event in self.kube.watch(self.path, params):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise KubeError(code, str(obj.get("message", "watch error")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self._version = str(version)
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                self.objects.pop(key_of(obj), None)
            else:
                self.objects[key_of(obj)] = obj
            self.changed.set()

    def update(self, obj: JsonObj) -> None:
        """What this process just wrote (seen before the watch brings it back)."""
        key = key_of(obj)
        if key:
            old = self.objects.get(key) or {}
            if _version(obj) >= _version(old):
                self.objects[key] = obj


def _version(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number (etcd's revision; a local mark after it ignored)."""
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    digits = text.split("+", 1)[0]
    return int(digits) if digits.isdigit() else 0
