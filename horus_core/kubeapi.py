"""The few Kubernetes API calls Horus makes (the node agent, horus-k8s), over aiohttp: JSON
requests, a watch stream, and where the credentials come from (a kubeconfig file, or the pod's
service account).

Credentials: a kubeconfig's current context (server; ``certificate-authority[-data]`` or
``insecure-skip-tls-verify``; ``token``, ``tokenFile`` or ``client-certificate[-data]`` +
``client-key[-data]``), or in a pod ``$KUBERNETES_SERVICE_HOST``/``PORT`` with the service
account's ``token`` (re-read every minute: the kubelet rotates it) and ``ca.crt``. Every request
has a deadline; a watch is bounded in time by the server (``timeoutSeconds``) and in line size
here. Errors are :class:`KubeError` with the apiserver's status code and message.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pathlib
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import yaml

SA_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
REQUEST_S = 15.0
MAX_LINE = 8 * 1024 * 1024  # one watch event (a pod object is a few KiB; bounds a broken stream)
TOKEN_REREAD_S = 60.0

JsonObj = dict[str, Any]


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass
class KubeConfig:
    server: str
    ssl: ssl.SSLContext | bool = True
    token: str = ""
    token_file: pathlib.Path | None = None
    _read_at: float | None = None

    def bearer(self) -> str:
        due = self._read_at is None or time.monotonic() - self._read_at > TOKEN_REREAD_S
        if self.token_file is not None and due:
            self.token = self.token_file.read_text(encoding="utf-8").strip()
            self._read_at = time.monotonic()
        return self.token


def in_cluster(sa_dir: pathlib.Path = SA_DIR) -> KubeConfig:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ValueError("not in a pod ($KUBERNETES_SERVICE_HOST unset): give --kubeconfig FILE")
    ctx = ssl.create_default_context(cafile=str(sa_dir / "ca.crt"))
    server = f"https://{'[' + host + ']' if ':' in host else host}:{port}"
    return KubeConfig(server, ctx, token_file=sa_dir / "token")


def load_kubeconfig(path: pathlib.Path, context: str = "") -> KubeConfig:
    """The kubeconfig's ``context`` (default: its current context); ValueError naming what is wrong."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--kubeconfig {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"--kubeconfig {path}: not a kubeconfig")
    name = context or str(doc.get("current-context") or "")
    ctx = _named(doc, "contexts", "context", name)
    cluster = _named(doc, "clusters", "cluster", str(ctx.get("cluster") or ""))
    user = _named(doc, "users", "user", str(ctx.get("user") or "")) if ctx.get("user") else {}
    server = str(cluster.get("server") or "")
    if not server.startswith(("https://", "http://")):
        raise ValueError(f"--kubeconfig {path}: cluster server {server!r} is not an http(s) URL")
    base = path.parent
    try:
        tls = _tls(cluster, user, base) if server.startswith("https://") else False
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ValueError(f"--kubeconfig {path}: TLS settings: {exc}") from None
    token_file = pathlib.Path(base, user["tokenFile"]) if user.get("tokenFile") else None
    return KubeConfig(server.rstrip("/"), tls, str(user.get("token") or ""), token_file)


def _named(doc: Mapping[str, Any], section: str, key: str, name: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(key), dict):
            return entry[key]  # type: ignore[no-any-return]
    raise ValueError(f"kubeconfig: no {key} named {name!r} in {section}")


def _tls(cluster: Mapping[str, Any], user: Mapping[str, Any], base: pathlib.Path) -> ssl.SSLContext | bool:
    if cluster.get("insecure-skip-tls-verify"):
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"], validate=True).decode()
        )
    elif cluster.get("certificate-authority"):
        ctx = ssl.create_default_context(cafile=str(base / cluster["certificate-authority"]))
    else:
        ctx = ssl.create_default_context()
    cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
    if cert and key:
        with tempfile.TemporaryDirectory() as tmp:  # ssl loads a chain from files only
            pair = pathlib.Path(tmp, "pair.pem")
            pair.touch(mode=0o600)
            pair.write_bytes(cert + b"\n" + key)
            ctx.load_cert_chain(str(pair))
    return ctx


def _pem(user: Mapping[str, Any], key: str, base: pathlib.Path) -> bytes:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"], validate=True)
    return pathlib.Path(base, user[key]).read_bytes() if user.get(key) else b""


class Kube:
    """One HTTP session to the apiserver; ``async with Kube(config) as kube``."""

    def __init__(self, config: KubeConfig, agent: str = "horus") -> None:
        self.config = config
        self.agent = agent
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Kube:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.config.ssl))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def _headers(self) -> dict[str, str]:
        token = self.config.bearer()
        head = {"Accept": "application/json", "User-Agent": self.agent}
        return head | ({"Authorization": f"Bearer {token}"} if token else {})

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> JsonObj:
        assert self._session is not None, "use Kube as an async context manager"
        timeout = aiohttp.ClientTimeout(total=REQUEST_S)
        async with self._session.request(
            method,
            self.config.server + path,
            json=body,
            params=params,
            headers=self._headers(),
            timeout=timeout,
        ) as resp:
            data = await resp.read()
            if resp.status >= 400:
                raise KubeError(resp.status, _message(data))
            out = json.loads(data) if data else {}
            return out if isinstance(out, dict) else {}

    async def patch(self, path: str, body: Mapping[str, Any], strategic: bool = False) -> JsonObj:
        """A merge patch (RFC 7386), or a strategic merge patch (lists of conditions merge by type)."""
        assert self._session is not None, "use Kube as an async context manager"
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        head = self._headers() | {"Content-Type": f"application/{kind}+json"}
        async with self._session.patch(
            self.config.server + path,
            data=json.dumps(body),
            headers=head,
            timeout=aiohttp.ClientTimeout(total=REQUEST_S),
        ) as resp:
            data = await resp.read()
            if resp.status >= 400:
                raise KubeError(resp.status, _message(data))
            out = json.loads(data) if data else {}
            return out if isinstance(out, dict) else {}

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[JsonObj]:
        """The events of a watch (``{"type", "object"}``), until the server ends it."""
        assert self._session is not None, "use Kube as an async context manager"
        server_s = float(params.get("timeoutSeconds", "300"))
        timeout = aiohttp.ClientTimeout(total=server_s + 30.0, sock_connect=REQUEST_S)
        query = dict(params) | {"watch": "1"}
        async with self._session.get(
            self.config.server + path, params=query, headers=self._headers(), timeout=timeout
        ) as resp:
            if resp.status >= 400:
                raise KubeError(resp.status, _message(await resp.read()))
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                if len(buf) > MAX_LINE and b"\n" not in buf:
                    raise KubeError(502, f"a watch event longer than {MAX_LINE} bytes")
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        if isinstance(event, dict):
                            yield event


def _message(data: bytes) -> str:
    try:
        status = json.loads(data)
    except ValueError:
        return data[:500].decode("utf-8", errors="replace")
    return str(status.get("message", status))[:500] if isinstance(status, dict) else str(status)[:500]


async def sleep_or(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until ``stop`` is set; True if it was set."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True
