"""``horus-k8s --extender HOST:PORT``: kube-scheduler's extender over HTTP (aiohttp), a thin
shell over horus_core.k8s.extender: ``POST /filter``, ``/prioritize``, ``/bind`` (and
``GET /healthz``). Each verb reads the nodes and pods from the apiserver (a short-lived cache for
filter and prioritize; bind reads afresh, one bind at a time), so the apiserver stays the source
of truth and a restart loses nothing. Bad input gets the verb's own answer with ``Error`` set
(HTTP 200, as kube-scheduler expects), never a crash."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from horus_core.errors import InvalidArgument
from horus_core.k8s import extender as ext
from horus_core.k8s.actions import binding
from horus_core.kubeapi import JsonObj, Kube, KubeError
from horus_core.policies.base import Policy

log = logging.getLogger("horus.k8s.extender")

CACHE_S = 0.5  # filter and prioritize of one pod come together: one read serves both
MAX_BODY = 16 * 1024 * 1024
LIVE = "status.phase!=Succeeded,status.phase!=Failed"


class Extender:
    """The verbs; ``scheduler`` is the kube-scheduler profile whose pods it places."""

    def __init__(
        self,
        kube: Kube,
        policy: Policy,
        scheduler: str = "default-scheduler",
        clock: Callable[[], float] = time.time,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube, self.policy, self.scheduler, self.clock = kube, policy, scheduler, clock
        self.leading = leading
        self._view: tuple[float, list[JsonObj], list[JsonObj]] | None = None
        self._bind_lock = asyncio.Lock()

    async def _state(self, fresh: bool = False) -> tuple[list[JsonObj], list[JsonObj]]:
        now = time.monotonic()
        if fresh or self._view is None or now - self._view[0] > CACHE_S:
            nodes = await self.kube.request("GET", "/api/v1/nodes")
            pods = await self.kube.request("GET", "/api/v1/pods", params={"fieldSelector": LIVE})
            self._view = (now, list(nodes.get("items") or []), list(pods.get("items") or []))
        return self._view[1], self._view[2]

    async def _verdict(self, pod: Mapping[str, Any], candidates: list[str], fresh: bool) -> ext.Verdict:
        nodes, pods = await self._state(fresh)
        world = ext.world_for(nodes, pods, pod, self.scheduler)
        return await asyncio.to_thread(ext.verdict, world, pod, candidates, self.policy, self.clock())

    async def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        candidates = ext.candidates_of(args)
        try:
            v = await self._verdict(ext.pod_of(args), candidates, fresh=False)
        except (InvalidArgument, KubeError, OSError) as exc:
            return {"NodeNames": [], "FailedNodes": {}, "Error": f"horus: {exc}"}
        return v.filter_result(candidates)

    async def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        candidates = ext.candidates_of(args)
        try:
            v = await self._verdict(ext.pod_of(args), candidates, fresh=False)
        except (InvalidArgument, KubeError, OSError):
            return [{"Host": n, "Score": 0} for n in candidates]
        return v.priorities(candidates)

    async def bind(self, args: Mapping[str, Any]) -> dict[str, str]:
        try:
            namespace, name, uid, node = ext.binding_args(args)
            if not self.leading():
                return {"Error": "horus: this replica does not lead; retry"}
            async with self._bind_lock:
                return {"Error": await self._bind(namespace, name, uid, node)}
        except (InvalidArgument, KubeError, OSError) as exc:
            return {"Error": f"horus: {exc}"}

    async def _bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        found = await self.kube.request(  # (a list: the shipped role has no pods/get)
            "GET", f"/api/v1/namespaces/{namespace}/pods", params={"fieldSelector": f"metadata.name={name}"}
        )
        pod = next(iter(found.get("items") or []), None)
        if pod is None:
            return f"pod {namespace}/{name} is gone"
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return f"pod {namespace}/{name} was recreated (uid {uid} is gone)"
        v = await self._verdict(pod, [node], fresh=True)
        if v.placement is None:
            return f"Horus cannot place pod {namespace}/{name} on node {node}: {v.failed.get(node) or v.wait}"
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        await self.kube.patch(path, v.placement.patch())
        await self.kube.request("POST", path + "/binding", binding(name, uid, node))
        self._view = None  # the next pod sees this one's GPUs taken
        log.info("extender: bound %s/%s to %s GPUs %s", namespace, name, node, v.placement.indices)
        return ""


def app(extender: Extender) -> web.Application:
    async def verb(request: web.Request, fn: Callable[[Mapping[str, Any]], Any]) -> web.Response:
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return web.json_response({"Error": f"horus: bad extender arguments: {exc}"}, status=400)
        return web.json_response(await fn(body))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    application = web.Application(client_max_size=MAX_BODY)
    application.router.add_post("/filter", lambda r: verb(r, extender.filter))
    application.router.add_post("/prioritize", lambda r: verb(r, extender.prioritize))
    application.router.add_post("/bind", lambda r: verb(r, extender.bind))
    application.router.add_get("/healthz", healthz)
    return application


async def serve(extender: Extender, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve the verbs on ``host:port`` until ``stop``."""
    runner = web.AppRunner(app(extender), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    log.info("extender: serving filter, prioritize and bind on %s:%d", host, port)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
