"""A real Kubernetes control plane for the tests, started by the project's own script
(scripts/k8s-dev.sh): etcd (Debian) and kube-apiserver 1.20 ($HORUS_K8S_BIN or ../shared/k8s/bin)
on loopback, free ports, RBAC on, static tokens for an admin, for the ``horus-node`` and
``horus-scheduler`` ServiceAccounts and for any others a test names, so each daemon runs with
exactly the shipped rights; kube-scheduler 1.20 too when a test gives its configuration. No
controller-manager, no kubelet: the tests play the kubelet where they need one.

Without the binaries the tests skip with the reason, unless $HORUS_REQUIRE_K8S is set (CI), where
a control plane that cannot start fails them.
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


SCRIPT = ROOT / "scripts" / "k8s-dev.sh"


def service_account_token(token: str, namespace: str, name: str) -> str:
    """A tokens.csv line for ``token`` as the ServiceAccount ``namespace/name`` (its groups too)."""
    user = f"system:serviceaccount:{namespace}:{name}"
    return f'{token},{user},{name}-uid,"system:serviceaccounts,system:serviceaccounts:{namespace}"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControlPlane:
    """The plane of ``scripts/k8s-dev.sh`` (the project's one way to start it) in ``base``:
    etcd + kube-apiserver, and kube-scheduler 1.20 when ``scheduler`` names its configuration."""

    def __init__(
        self, base: pathlib.Path, tokens: tuple[str, ...] = (), scheduler: pathlib.Path | None = None
    ) -> None:
        self.base = base
        self.port = 0
        self.tokens = (
            service_account_token(NODE_TOKEN, "horus-system", "horus-node"),
            service_account_token(SCHEDULER_TOKEN, "horus-system", "horus-scheduler"),
            *tokens,
        )
        self.scheduler = scheduler
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname, self._ctx.verify_mode = False, ssl.CERT_NONE

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> pathlib.Path:
        return self.base / "certs" / "apiserver.crt"

    def start(self) -> None:
        if shutil.which("etcd") is None:
            _unavailable("no etcd on PATH (apt-get install etcd-server; ../shared/k8s/README.md)")
        extra = self.base / "tokens.extra.csv"
        extra.write_text("".join(line + "\n" for line in self.tokens))
        argv = ["bash", str(SCRIPT), "start", str(self.base), "--tokens", str(extra), "--no-build"]
        if self.scheduler is not None:
            argv += ["--scheduler", str(self.scheduler)]
        env = os.environ | {"HORUS_K8S_ADMIN_TOKEN": ADMIN_TOKEN, "HORUS_K8S_START_S": f"{START_S:.0f}"}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=START_S + 30)
        if done.returncode != 0:
            _unavailable(
                f"the control plane did not start (k8s-dev.sh: exit {done.returncode}): {done.stderr[-2000:]}"
            )
        env_file = dict(
            line.split("=", 1) for line in (self.base / "plane.env").read_text().splitlines() if "=" in line
        )
        self.port = int(env_file["PORT"])

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.base)], check=False, timeout=30)

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
    "Service": "/api/v1/namespaces/{ns}/services",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "PodDisruptionBudget": "/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
}


def _collection(doc: dict[str, Any]) -> str:
    return _PATHS[doc["kind"]].format(ns=doc.get("metadata", {}).get("namespace", "default"))


@contextlib.contextmanager
def control_plane(
    base: pathlib.Path, tokens: tuple[str, ...] = (), scheduler: pathlib.Path | None = None
) -> Iterator[ControlPlane]:
    plane = ControlPlane(base, tokens, scheduler)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
