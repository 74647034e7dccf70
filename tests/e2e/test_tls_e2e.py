"""Mutual TLS: the master accepts only clients and workers with a certificate from its CA."""

from __future__ import annotations

import json
import pathlib
import subprocess
import time

import pytest

from tests.e2e.cluster import BIN, LocalCluster

pytestmark = pytest.mark.timeout(120)


def openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: pathlib.Path) -> None:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=horus-test-ca",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, ext in (("server", ["-extfile", "san.ext"]), ("client", [])):
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN=horus-{name}",
            cwd=d,
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "1",
            *ext,
            cwd=d,
        )


def test_mutual_tls_admits_only_certified_peers(tmp_path: pathlib.Path) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    make_pki(pki)
    c = LocalCluster(tmp_path)
    tls_client = [
        "--tls-ca",
        str(pki / "ca.pem"),
        "--tls-cert",
        str(pki / "client.pem"),
        "--tls-key",
        str(pki / "client.key"),
    ]
    worker = None
    try:
        c.start_master(
            "--tls-cert",
            str(pki / "server.pem"),
            "--tls-key",
            str(pki / "server.key"),
            "--tls-client-ca",
            str(pki / "ca.pem"),
        )
        worker = subprocess.Popen(
            [
                str(BIN / "horus-worker"),
                "--master",
                c.addr,
                "--name",
                "tls-w",
                "--fake-gpus",
                "2",
                "--state-dir",
                str(tmp_path / "w"),
                *tls_client,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        nodes: list[dict[str, object]] = []
        while not nodes and time.monotonic() < deadline:
            out = c.hctl(*tls_client, "nodes", "-o", "json", check=False)
            nodes = json.loads(out.stdout) if out.returncode == 0 else []
            time.sleep(0.3)
        assert [n["name"] for n in nodes] == ["tls-w"], "a worker with a client certificate registers"

        plain = c.hctl("nodes", check=False)
        assert plain.returncode != 0 and "Traceback" not in plain.stderr
        no_cert = c.hctl("--tls-ca", str(pki / "ca.pem"), "nodes", check=False)
        assert no_cert.returncode != 0, "TLS without a client certificate is refused"
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=20)
        c.stop()
