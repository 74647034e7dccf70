"""A real Kubernetes control plane for the node agent's and the scheduler's tests: etcd (Debian)
and kube-apiserver 1.20 (../shared/k8s/bin, or $HORUS_K8S_BIN) on loopback, free ports, RBAC on,
static tokens for an admin and for the ``horus-node`` and ``horus-scheduler`` ServiceAccounts, so
the agent and horus-k8s run with exactly the shipped rights. No controller-manager, no kubelet:
the tests play the kubelet where they need one.

Without the binaries the tests skip with the reason, unless $HORUS_REQUIRE_K8S is set (CI), where
a control plane that cannot start fails them. (A minimal fixture of the node agent's own; the
scheduler's tests bring the project's control-plane script.)
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

REQUIRE_ENV = "HORUS_REQUIRE_K8S"
ROOT = pathlib.Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "horus-test-admin"
NODE_TOKEN = "horus-test-node-agent"
NODE_USER = "system:serviceaccount:horus-system:horus-node"
SCHEDULER_TOKEN = "horus-test-scheduler"
SCHEDULER_USER = "system:serviceaccount:horus-system:horus-scheduler"
_SA_GROUPS = '"system:serviceaccounts,system:serviceaccounts:horus-system"'
START_S = 40.0


def _unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"${REQUIRE_ENV} is set but {why}")
    pytest.skip(why)


def binaries() -> tuple[str, str]:
    dirs = [os.environ.get("HORUS_K8S_BIN", ""), str(ROOT.parent / "shared" / "k8s" / "bin")]
    apiserver = next(
        (
            str(pathlib.Path(d, "kube-apiserver"))
            for d in dirs
            if d and pathlib.Path(d, "kube-apiserver").is_file()
        ),
        None,
    )
    apiserver = apiserver or shutil.which("kube-apiserver")
    etcd = shutil.which("etcd")
    if apiserver is None or etcd is None:
        _unavailable(
            f"no control plane: kube-apiserver {apiserver or 'missing'}, etcd {etcd or 'missing'} "
            "(../shared/k8s/README.md; apt-get install etcd-server)"
        )
    assert apiserver is not None and etcd is not None
    return apiserver, etcd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControlPlane:
    def __init__(self, base: pathlib.Path) -> None:
        self.base = base
        self.port = 0
        self.procs: list[subprocess.Popen[bytes]] = []
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname, self._ctx.verify_mode = False, ssl.CERT_NONE

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> pathlib.Path:
        return self.base / "certs" / "apiserver.crt"

    def start(self) -> None:
        apiserver, etcd = binaries()
        client, peer, self.port = free_port(), free_port(), free_port()
        (self.base / "tokens.csv").write_text(
            f"{ADMIN_TOKEN},admin,admin-uid,system:masters\n"
            f"{NODE_TOKEN},{NODE_USER},node-uid,{_SA_GROUPS}\n"
            f"{SCHEDULER_TOKEN},{SCHEDULER_USER},scheduler-uid,{_SA_GROUPS}\n"
        )
        key = self.base / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        peer_url = f"http://127.0.0.1:{peer}"
        self._spawn(
            "etcd",
            [
                etcd,
                "--data-dir",
                str(self.base / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{client}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{client}",
                "--listen-peer-urls",
                peer_url,
                "--initial-advertise-peer-urls",
                peer_url,
                "--initial-cluster",
                f"default={peer_url}",
            ],
        )
        self._spawn(
            "apiserver",
            [
                apiserver,
                f"--etcd-servers=http://127.0.0.1:{client}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--insecure-port=0",
                f"--cert-dir={self.base / 'certs'}",
                f"--token-auth-file={self.base / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--disable-admission-plugins=ServiceAccount",  # no token controller here
            ],
        )
        self._wait_ready()

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.base / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.base))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            with contextlib.suppress(OSError, urllib.error.URLError):
                if self.call("GET", "/readyz", raw=True) == "ok":
                    return
            time.sleep(0.2)
        tail = (self.base / "apiserver.log").read_text(errors="replace")[-2000:]
        self.stop()
        _unavailable(f"the control plane did not start in {START_S:.0f} s: {tail}")

    def stop(self) -> None:
        for p in reversed(self.procs):  # throwaway state: no graceful shutdown needed
            p.kill()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def call(
        self, method: str, path: str, body: Any = None, *, token: str = ADMIN_TOKEN, raw: bool = False
    ) -> Any:
        """One request as the admin (or ``token``): the decoded answer; HTTPError for a 4xx/5xx."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req.add_header("Content-Type", kind)
        with urllib.request.urlopen(req, context=self._ctx, timeout=10) as resp:
            text = resp.read().decode()
        return text if raw else json.loads(text)

    def apply(self, manifest: pathlib.Path) -> list[str]:
        """Create every object of a YAML manifest (the kinds Horus ships); their kinds."""
        kinds = []
        for doc in yaml.safe_load_all(manifest.read_text()):
            if doc:
                self.call("POST", _collection(doc), doc)
                kinds.append(str(doc["kind"]))
        return kinds

    def kubeconfig(self, path: pathlib.Path, token: str) -> pathlib.Path:
        ca = self.ca_file  # the apiserver's self-signed pair: its CA names 127.0.0.1
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "test",
                    "clusters": [
                        {"name": "c", "cluster": {"server": self.server, "certificate-authority": str(ca)}}
                    ],
                    "users": [{"name": "u", "user": {"token": token}}],
                    "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
                }
            )
        )
        return path


_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "PodDisruptionBudget": "/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}


def _collection(doc: dict[str, Any]) -> str:
    return _PATHS[doc["kind"]].format(ns=doc.get("metadata", {}).get("namespace", "default"))


@contextlib.contextmanager
def control_plane(base: pathlib.Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(base)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
