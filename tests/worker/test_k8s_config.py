"""Where the node agent's credentials come from (horus_core/kubeapi.py: kubeconfig, in-cluster)
and what its command line refuses (worker/k8s/cli.py)."""

from __future__ import annotations

import base64
import pathlib
import ssl

import pytest
import yaml

from horus_core import kubeapi
from horus_core.kubeapi import in_cluster, load_kubeconfig
from tests.e2e.test_tls_e2e import make_pki
from worker.k8s import cli


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """A throwaway CA and a client certificate and key it signed (the TLS tests' PKI)."""
    d = tmp_path_factory.mktemp("pki")
    make_pki(d)
    return d / "ca.pem", d / "client.pem", d / "client.key"


def _write(
    tmp: pathlib.Path, cluster: dict[str, object], user: dict[str, object], current: str = "ctx"
) -> pathlib.Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "ctx", "context": {"cluster": "c", "user": "u"}},
            {"name": "other", "context": {"cluster": "c"}},
        ],
    }
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_token_and_a_ca_file_relative_to_the_kubeconfig(
    tmp_path: pathlib.Path, pem: tuple[pathlib.Path, pathlib.Path]
) -> None:
    (tmp_path / "ca.pem").write_bytes(pem[0].read_bytes())
    config = load_kubeconfig(
        _write(
            tmp_path, {"server": "https://10.0.0.1:6443/", "certificate-authority": "ca.pem"}, {"token": "t0"}
        )
    )
    assert config.server == "https://10.0.0.1:6443" and config.bearer() == "t0"
    assert isinstance(config.ssl, ssl.SSLContext) and config.ssl.verify_mode == ssl.CERT_REQUIRED


def test_inline_ca_and_client_certificate_data(
    tmp_path: pathlib.Path, pem: tuple[pathlib.Path, pathlib.Path]
) -> None:
    b64 = {
        k: base64.b64encode(p.read_bytes()).decode() for k, p in zip(("ca", "cert", "key"), pem, strict=True)
    }
    config = load_kubeconfig(
        _write(
            tmp_path,
            {"server": "https://h:1", "certificate-authority-data": b64["ca"]},
            {"client-certificate-data": b64["cert"], "client-key-data": b64["key"]},
        )
    )
    assert isinstance(config.ssl, ssl.SSLContext) and config.bearer() == ""
    wrong = {"client-certificate-data": b64["ca"], "client-key-data": b64["key"]}  # not the key's certificate
    with pytest.raises(ValueError, match="TLS settings"):
        load_kubeconfig(
            _write(tmp_path, {"server": "https://h:1", "certificate-authority-data": b64["ca"]}, wrong)
        )


def test_a_token_file_is_read_again_after_a_minute(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first\n")
    config = load_kubeconfig(_write(tmp_path, {"server": "http://127.0.0.1:1"}, {"tokenFile": "token"}))
    now = [1000.0]
    monkeypatch.setattr(kubeapi.time, "monotonic", lambda: now[0])
    assert config.ssl is False and config.bearer() == "first"
    (tmp_path / "token").write_text("rotated\n")
    now[0] += kubeapi.TOKEN_REREAD_S - 1
    assert config.bearer() == "first"
    now[0] += 2
    assert config.bearer() == "rotated"


def test_another_context_and_insecure(tmp_path: pathlib.Path) -> None:
    path = _write(tmp_path, {"server": "https://h:1", "insecure-skip-tls-verify": True}, {"token": "t"})
    config = load_kubeconfig(path, "other")
    assert (
        config.bearer() == ""
        and isinstance(config.ssl, ssl.SSLContext)
        and config.ssl.verify_mode == ssl.CERT_NONE
    )


@pytest.mark.parametrize(
    ("cluster", "user", "current", "message"),
    [
        ({"server": "https://h:1"}, {}, "missing", "no context named 'missing'"),
        ({"server": "h:1"}, {}, "ctx", "is not an http(s) URL"),
        ({"server": "https://h:1", "certificate-authority": "nope.pem"}, {}, "ctx", "TLS settings"),
        ({"server": "https://h:1", "certificate-authority-data": "!!!"}, {}, "ctx", "TLS settings"),
    ],
)
def test_a_bad_kubeconfig_is_named(
    tmp_path: pathlib.Path, cluster: dict[str, object], user: dict[str, object], current: str, message: str
) -> None:
    with pytest.raises(ValueError, match="kubeconfig") as err:
        load_kubeconfig(_write(tmp_path, cluster, user, current))
    assert message in str(err.value)


def test_unreadable_kubeconfigs(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="No such file"):
        load_kubeconfig(tmp_path / "absent")
    (tmp_path / "list").write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="not a kubeconfig"):
        load_kubeconfig(tmp_path / "list")


def test_in_cluster(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, pem: tuple[pathlib.Path, pathlib.Path]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ValueError, match="--kubeconfig"):
        in_cluster(tmp_path)
    (tmp_path / "ca.crt").write_bytes(pem[0].read_bytes())
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = in_cluster(tmp_path)
    assert config.server == "https://[fd00::1]:443" and config.bearer() == "sa-token"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--node-name", "Bad_Name"],
        ["--node-name", "n" * 250],
        ["--node-name", "n", "--namespace", "Horus"],
        ["--node-name", "n", "--report-interval", "0.5"],
        ["--node-name", "n", "--memory-watch-s", "2"],
        ["--node-name", "n", "--memory-slack-mib", "-1"],
        ["--node-name", "n", "--sim-interference", "x.json"],
    ],
)
def test_the_command_line_refuses(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SystemExit) as done:
        cli.parse_args(["--kubernetes", *argv])
    assert done.value.code == 2 and "error:" in capsys.readouterr().err


def test_the_node_name_comes_from_the_downward_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-7.example")
    args = cli.parse_args(["--kubernetes", "--pod-logs", ""])
    config = cli.agent_config(args)
    assert (config.node, config.namespace, config.interval_s, config.pod_logs, config.simulated) == (
        "gpu-7.example",
        "horus-system",
        15.0,
        None,
        False,
    )
