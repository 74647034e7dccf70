"""The node agent's apiserver calls: its node's pods (list + watch), its report ConfigMap
(create or replace, keeping the resourceVersion), evictions and Events on pods.

Each call is one verb the ``horus-node`` ServiceAccount is granted
(deploy/kubernetes/node-agent-rbac.yaml): get/list/watch pods, create pods/eviction, create
events, get/create/update configmaps in the Horus namespace. The Eviction's API version comes
from discovery: ``policy/v1`` where the server serves it (1.22+), else ``policy/v1beta1``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from horus_core.k8sreport import DATA_KEY, LABEL_NODE_REPORT, LABEL_PART_OF, configmap_name
from horus_core.kubeapi import JsonObj, Kube, KubeError
from worker.k8s.pods import NodePod

log = logging.getLogger(__name__)
COMPONENT = "horus-node"
WATCH_S = 240


class NodeApi:
    def __init__(self, kube: Kube, node: str, namespace: str) -> None:
        self.kube, self.node, self.namespace = kube, node, namespace
        self._selector = {"fieldSelector": f"spec.nodeName={node}"}
        self._report_rv: str | None = None  # the report ConfigMap's resourceVersion, once known
        self._eviction_version = ""

    # ------------------------------------------------------------------ pods

    async def list_pods(self) -> tuple[list[JsonObj], str]:
        """The node's pods and the list's resourceVersion (to watch from)."""
        out = await self.kube.request("GET", "/api/v1/pods", params=self._selector)
        items = out.get("items")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else [], str(
            out.get("metadata", {}).get("resourceVersion", "")
        )

    def watch_pods(self, resource_version: str) -> AsyncIterator[JsonObj]:
        params = self._selector | {
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_S),
        }
        return self.kube.watch("/api/v1/pods", params)

    # ------------------------------------------------------------------ the report

    async def put_report(self, text: str) -> None:
        """Create or replace ``horus-node-<node>``; a conflict re-reads its version and tries once more."""
        for _ in range(2):
            try:
                await self._write(text)
                return
            except KubeError as exc:
                if exc.status not in (404, 409):
                    raise
                self._report_rv = await self._current_rv()
        await self._write(text)

    async def _write(self, text: str) -> None:
        name = configmap_name(self.node)
        body: JsonObj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict([LABEL_PART_OF, LABEL_NODE_REPORT]),
            },
            "data": {DATA_KEY: text},
        }
        base = f"/api/v1/namespaces/{self.namespace}/configmaps"
        if self._report_rv is None:
            self._report_rv = await self._current_rv()
        if self._report_rv == "":
            out = await self.kube.request("POST", base, body)
        else:
            body["metadata"]["resourceVersion"] = self._report_rv
            out = await self.kube.request("PUT", f"{base}/{name}", body)
        self._report_rv = str(out.get("metadata", {}).get("resourceVersion", ""))

    async def _current_rv(self) -> str:
        """The report's resourceVersion, "" where it does not exist yet."""
        try:
            cm = await self.kube.request(
                "GET", f"/api/v1/namespaces/{self.namespace}/configmaps/{configmap_name(self.node)}"
            )
        except KubeError as exc:
            if exc.status == 404:
                return ""
            raise
        return str(cm.get("metadata", {}).get("resourceVersion", ""))

    # ------------------------------------------------------------------ evictions and events

    async def evict(self, pod: NodePod) -> None:
        """Ask the Eviction API to evict ``pod`` (a PodDisruptionBudget may refuse: KubeError 429)."""
        version = await self.eviction_version()
        body = {
            "apiVersion": version,
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        await self.kube.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body)

    async def eviction_version(self) -> str:
        """``policy/v1`` or ``policy/v1beta1``: what the server's pods/eviction takes (discovery)."""
        if not self._eviction_version:
            found = "policy/v1beta1"
            resources = (await self.kube.request("GET", "/api/v1")).get("resources") or []
            for r in resources:
                if isinstance(r, dict) and r.get("name") == "pods/eviction" and r.get("group") == "policy":
                    found = f"policy/{r.get('version') or 'v1beta1'}"
            self._eviction_version = found
        return self._eviction_version

    async def event(self, pod: NodePod, reason: str, message: str) -> None:
        """A Warning Event on the pod, as ``kubectl describe pod`` shows them."""
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.name}.{int(now.timestamp() * 1e9):x}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": COMPONENT, "host": self.node},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": f"horus.io/{COMPONENT}",
            "reportingInstance": self.node,
        }
        await self.kube.request("POST", f"/api/v1/namespaces/{pod.namespace}/events", body)
