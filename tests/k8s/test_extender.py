"""Extender mode on a real control plane: kube-scheduler 1.20 started by scripts/k8s-dev.sh with
the shipped deploy/kubernetes/kube-scheduler-extender.yaml (its urlPrefix pointed here), calling
``horus-k8s --extender`` (a real subprocess under the shipped ServiceAccount's token). Pods land
where Horus says, with Horus's plan written by its bind verb; a filtered-out node is explained in
kube-scheduler's FailedScheduling event; a bad pod value is named; no GPU is given twice."""

from __future__ import annotations

import pathlib
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.k8s.nodeplane import ControlPlane, control_plane, free_port
from tests.k8s.schedplane import DEPLOY, HorusK8s, add_node, add_pod, events, get_pod, node_of, until

NS = "team"
CONFIG = DEPLOY / "kube-scheduler-extender.yaml"


@pytest.fixture(scope="module")
def extender_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory, extender_port: int) -> Iterator[ControlPlane]:
    base = tmp_path_factory.mktemp("k8s")
    config = yaml.safe_load(CONFIG.read_text())
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{extender_port}"
    (base / "scheduler.yaml").write_text(yaml.safe_dump(config))
    with control_plane(base, scheduler=base / "scheduler.yaml") as p:
        p.apply(DEPLOY / "namespace.yaml")
        p.apply(DEPLOY / "scheduler-rbac.yaml")
        p.call("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        add_node(p, "big", 4)
        add_node(p, "other", 4)
        add_node(p, "small", 1)
        yield p


@pytest.fixture(scope="module")
def extender(
    plane: ControlPlane, extender_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HorusK8s]:
    ext = HorusK8s(plane, tmp_path_factory.mktemp("ext"), "--extender", f"127.0.0.1:{extender_port}").start()
    url = f"http://127.0.0.1:{extender_port}/healthz"
    until("the extender serving", lambda: _answers(url), 20)
    try:
        yield ext
    finally:
        assert ext.stop() == 0, ext.text()[-2000:]


def _answers(url: str) -> bool | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.read() == b"ok" or None
    except OSError:
        return None


def _pod(plane: ControlPlane, name: str, gpus: int, **kw: object) -> None:
    add_pod(plane, NS, name, gpus, schedulerName="default-scheduler", **kw)  # type: ignore[arg-type]


def test_kube_scheduler_places_pods_where_horus_says(plane: ControlPlane, extender: HorusK8s) -> None:
    names = [f"one-{i}" for i in range(3)] + ["two"]
    for name in names:
        _pod(plane, name, 2 if name == "two" else 1, notes={"horus.io/exclusive": "true"})
    taken: set[tuple[str, str]] = set()
    for name in names:
        node = until(f"{name} bound", lambda n=name: node_of(plane, NS, n), 30)  # type: ignore[misc]
        notes = (get_pod(plane, NS, name) or {})["metadata"]["annotations"]
        assert notes["horus.io/node"] == node  # bound where Horus's plan says (its bind verb wrote it)
        gpus = notes["horus.io/gpus"].split(",")
        assert len(gpus) == (2 if name == "two" else 1)
        for g in gpus:
            assert (node, g) not in taken, f"GPU {g} of {node} given twice"
            taken.add((node, g))
    assert any(r == "Scheduled" for r, _ in events(plane, NS, "two"))


def test_a_filtered_out_node_is_explained(plane: ControlPlane, extender: HorusK8s) -> None:
    _pod(plane, "huge", 8)

    def failed() -> str | None:
        msgs = [m for r, m in events(plane, NS, "huge") if r == "FailedScheduling"]
        return msgs[-1] if msgs else None

    message = until("kube-scheduler's FailedScheduling", failed, 30)
    assert "node small has 1 usable GPUs; the pod asks for 8" in message
    assert "node big has 4 usable GPUs; the pod asks for 8" in message
    assert node_of(plane, NS, "huge") is None


def test_a_bad_pod_value_is_named(plane: ControlPlane, extender: HorusK8s) -> None:
    _pod(plane, "bad", 1, notes={"horus.io/gpu-memory": "lots"})

    def failed() -> str | None:
        msgs = [m for r, m in events(plane, NS, "bad") if r == "FailedScheduling"]
        return msgs[-1] if msgs else None

    message = until("kube-scheduler's FailedScheduling", failed, 30)
    assert "horus.io/gpu-memory" in message and "bad pod value" in message
    assert node_of(plane, NS, "bad") is None
    assert extender.alive()


def test_the_verbs_refuse_bad_input_with_one_line(extender: HorusK8s, extender_port: int) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{extender_port}/bind", data=b'{"PodName": "x"}', method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        answer = yaml.safe_load(resp.read())
    assert answer["Error"].startswith("horus: ") and "PodNamespace" in answer["Error"]
    bad = urllib.request.Request(f"http://127.0.0.1:{extender_port}/filter", data=b"[1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(bad, timeout=5)
    assert exc.value.code == 400
    assert extender.alive()


def test_the_shipped_configuration_names_the_shipped_service(plane: ControlPlane) -> None:
    assert plane.apply(DEPLOY / "extender-deployment.yaml") == ["Deployment", "Service"]  # (valid objects)
    svc = plane.call("GET", "/api/v1/namespaces/horus-system/services/horus-extender")
    port = svc["spec"]["ports"][0]["port"]
    config = yaml.safe_load(CONFIG.read_text())
    assert config["extenders"][0]["urlPrefix"] == f"http://horus-extender.horus-system.svc:{port}"
    args = plane.call("GET", "/apis/apps/v1/namespaces/horus-system/deployments/horus-extender")["spec"][
        "template"
    ]["spec"]["containers"][0]["args"][0]
    assert f"--extender 0.0.0.0:{port}" in args
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1beta1"
    (ext,) = config["extenders"]
    assert ext["nodeCacheCapable"] is True and ext["bindVerb"] == "bind"
    assert ext["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": True}]
    assert pathlib.Path(CONFIG).is_file()
