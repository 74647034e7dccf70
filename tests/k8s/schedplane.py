"""What the scheduler's tests share: a control plane with the shipped RBAC applied, nodes as GPU
feature discovery would label them, pods, horus-k8s as a real subprocess under the
``horus-scheduler`` ServiceAccount's token, and the kubelet's part (pod status), the only
simulated piece."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from tests.k8s.nodeplane import ROOT, SCHEDULER_TOKEN, ControlPlane, control_plane

T = TypeVar("T")
ENV = os.environ | {"PYTHONPATH": str(ROOT)}
DEPLOY = ROOT / "deploy" / "kubernetes"
A100 = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.memory": "40960",
    "nvidia.com/gpu.count": "4",
}


@contextlib.contextmanager
def scheduler_plane(base: pathlib.Path, namespaces: tuple[str, ...]) -> Iterator[ControlPlane]:
    with control_plane(base) as plane:
        assert plane.apply(DEPLOY / "namespace.yaml") == ["Namespace"]
        assert plane.apply(DEPLOY / "scheduler-rbac.yaml") == [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ]
        for ns in namespaces:
            plane.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        yield plane


def add_node(
    plane: ControlPlane,
    name: str,
    gpus: int = 4,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "32",
    ready: bool = True,
) -> None:
    """A node as the kubelet and GPU feature discovery leave it (no not-ready taint: no controller here)."""
    meta = {"name": name, "labels": A100 | (labels or {}), "annotations": annotations or {}}
    plane.call("POST", "/api/v1/nodes", {"metadata": meta})
    plane.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    res = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": "128Gi", "pods": "110"}
    status = {
        "capacity": res,
        "allocatable": res,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
        "addresses": [{"type": "InternalIP", "address": f"10.1.0.{sum(map(ord, name)) % 250}"}],
    }
    plane.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": status})


def add_pod(
    plane: ControlPlane,
    ns: str,
    name: str,
    gpus: int | str | None = 1,
    *,
    notes: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    lim = ({"nvidia.com/gpu": gpus} if gpus is not None else {}) | (limits or {})
    container = {"name": "main", "image": "trainer", "resources": {"limits": lim, "requests": requests or {}}}
    body = {
        "metadata": {"name": name, "annotations": notes or {}, "labels": labels or {}},
        "spec": {"schedulerName": "horus", "containers": [container]} | spec,
    }
    return dict(plane.call("POST", f"/api/v1/namespaces/{ns}/pods", body))


def get_pod(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(plane.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def node_of(plane: ControlPlane, ns: str, name: str) -> str | None:
    pod = get_pod(plane, ns, name)
    return pod["spec"].get("nodeName") if pod else None


def condition(plane: ControlPlane, ns: str, name: str) -> tuple[str, str] | None:
    """The pod's PodScheduled=False (reason, message), None without one."""
    pod = get_pod(plane, ns, name) or {}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("reason")), str(c.get("message"))
    return None


def events(plane: ControlPlane, ns: str, name: str) -> list[tuple[str, str]]:
    got = plane.call("GET", f"/api/v1/namespaces/{ns}/events")
    return [(e["reason"], e["message"]) for e in got["items"] if e["involvedObject"]["name"] == name]


def kubelet_runs(plane: ControlPlane, ns: str, name: str) -> None:
    """Play the kubelet: the bound pod runs."""
    plane.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {"phase": "Running"}})


def kubelet_deletes(plane: ControlPlane, ns: str) -> None:
    """Play the kubelet for terminating pods: they are gone (a grace of 0 ends them at once)."""
    for pod in plane.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            with contextlib.suppress(urllib.error.HTTPError):
                plane.call(
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}",
                    {"gracePeriodSeconds": 0},
                )


def clear(plane: ControlPlane, ns: str, nodes: tuple[str, ...] = ()) -> None:
    """Delete a namespace's pods at once, and ``nodes``."""
    for pod in plane.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]:
        with contextlib.suppress(urllib.error.HTTPError):
            plane.call(
                "DELETE", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}", {"gracePeriodSeconds": 0}
            )
    for n in nodes:
        with contextlib.suppress(urllib.error.HTTPError):
            plane.call("DELETE", f"/api/v1/nodes/{n}")


def until(what: str, probe: Callable[[], T | None], within_s: float = 10.0) -> T:
    deadline = time.monotonic() + within_s
    while True:
        got = probe()
        if got is not None and got is not False:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class HorusK8s:
    """``horus-k8s`` as a subprocess under the shipped ServiceAccount's token."""

    def __init__(self, plane: ControlPlane, base: pathlib.Path, *args: str) -> None:
        self.plane, self.base, self.args = plane, base, args
        self.kubeconfig = plane.kubeconfig(base / "scheduler.kubeconfig", SCHEDULER_TOKEN)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = pathlib.Path(os.environ.get("HORUS_K8S_TEST_LOG", base / "horus-k8s.log"))

    def start(self) -> HorusK8s:
        argv = [
            sys.executable,
            "-m",
            "master.k8s.main",
            "--kubeconfig",
            str(self.kubeconfig),
            "--tick",
            "0.5",
        ]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*argv, *self.args], stdout=out, stderr=subprocess.STDOUT, env=ENV)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def until(self, what: str, probe: Callable[[], T | None], within_s: float = 10.0) -> T:
        """:func:`until`, failing at once (with its log) if horus-k8s died meanwhile."""

        def alive_probe() -> T | None:
            if not self.alive():
                raise AssertionError(f"horus-k8s exited while waiting for {what}: {self.text()[-3000:]}")
            return probe()

        return until(what, alive_probe, within_s)

    def text(self) -> str:
        return self.log.read_text(errors="replace")
