"""horus-k8s on a real kube-apiserver + etcd with RBAC, as a real subprocess under the shipped
``horus-scheduler`` ServiceAccount (deploy/kubernetes/scheduler-rbac.yaml: proven sufficient).
This test plays the kubelet (pod status); nothing else is simulated.

Covered: a pod bound on its GPUs with its plan and a Scheduled Event; a pod that cannot fit told
why (PodScheduled=False, Horus's reason code, a FailedScheduling Event), bound once room frees;
bad values named in the condition and an Event while the scheduler lives on; CPU requests that
must fit; HAMi's and KAI's dialects (HAMi's allocation annotations on a HAMi node); a cordoned
node; a restart in the middle of a placement (pods half bound) that binds nothing twice; the
Deployment manifest and its ConfigMap (policy, queue file) accepted and valid.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator

import pytest

from horus_core.policies import policy_names
from horus_core.queues import parse_config
from tests.k8s.nodeplane import ADMIN_TOKEN, ControlPlane
from tests.k8s.schedplane import (
    DEPLOY,
    ENV,
    HorusK8s,
    add_node,
    add_pod,
    clear,
    condition,
    events,
    get_pod,
    kubelet_runs,
    node_of,
    scheduler_plane,
)

pytestmark = pytest.mark.timeout(120)
NS = "team-a"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with scheduler_plane(tmp_path_factory.mktemp("k8s"), (NS,)) as p:
        yield p


@pytest.fixture(scope="module")
def sched(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HorusK8s]:
    s = HorusK8s(plane, tmp_path_factory.mktemp("sched"), "--policy", "horus").start()
    yield s
    if s.alive():
        assert s.stop() == 0, s.text()[-3000:]


@pytest.fixture
def nodes(plane: ControlPlane) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    clear(plane, NS, tuple(made))


def test_a_pod_is_bound_on_its_gpus_with_an_event(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str]
) -> None:
    add_node(plane, "n1", 4)
    nodes.append("n1")
    add_pod(
        plane,
        NS,
        "one",
        2,
        notes={"horus.io/job-type": "ResNet-18 (batch size 32)", "horus.io/exclusive": "true"},
    )
    assert sched.until("the binding", lambda: node_of(plane, NS, "one"), 60) == "n1"  # (a cold JIT cache)
    notes = (get_pod(plane, NS, "one") or {})["metadata"]["annotations"]
    assert notes["horus.io/node"] == "n1" and len(notes["horus.io/gpus"].split(",")) == 2
    assert sched.until("the event", lambda: [e for e in events(plane, NS, "one") if e[0] == "Scheduled"])
    assert sched.alive()


def test_waits_say_why_and_bad_values_name_the_field(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str]
) -> None:
    add_node(plane, "n2", 2)
    nodes.append("n2")
    add_pod(plane, NS, "fills", 2, notes={"horus.io/exclusive": "true"})
    sched.until("fills bound", lambda: node_of(plane, NS, "fills"))
    add_pod(plane, NS, "waits", 1, notes={"horus.io/exclusive": "true"})
    reason, message = sched.until("the wait", lambda: condition(plane, NS, "waits"))
    assert reason in ("Resources", "Interference") and message
    assert sched.until(
        "its event", lambda: [e for e in events(plane, NS, "waits") if e[0] == "FailedScheduling"]
    )
    add_pod(plane, NS, "bad", 1, notes={"horus.io/gpu-memory": "lots"})
    reason, message = sched.until("the refusal", lambda: condition(plane, NS, "bad"))
    assert reason == "InvalidArgument" and "metadata.annotations[horus.io/gpu-memory]" in message
    assert any("horus.io/gpu-memory" in m for _, m in events(plane, NS, "bad"))
    shown = {r["name"]: r for r in _hctl_pods(plane, sched)}  # what `hctl pods` says of them
    assert shown["bad"]["why"].startswith("InvalidArgument: metadata.annotations[horus.io/gpu-memory]")
    assert (shown["fills"]["node"], len(shown["fills"]["gpus"].split(","))) == ("n2", 2)
    assert sched.alive()
    clear(plane, NS)  # room again: a pod whose CPU request does not fit waits, the next goes
    add_pod(plane, NS, "too-big", 1, requests={"cpu": "64"})
    assert "CPU request (64)" in sched.until("the CPU wait", lambda: condition(plane, NS, "too-big"))[1]
    add_pod(plane, NS, "waits", 1)
    assert sched.until("bound after the room freed", lambda: node_of(plane, NS, "waits")) == "n2"


def _hctl_pods(plane: ControlPlane, sched: HorusK8s) -> list[dict[str, str]]:
    admin = plane.kubeconfig(sched.base / "admin.kubeconfig", ADMIN_TOKEN)
    argv = [
        sys.executable,
        "-m",
        "horus_core.cli",
        "pods",
        "--kubeconfig",
        str(admin),
        "-n",
        NS,
        "-o",
        "json",
    ]
    got = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=60, check=True)
    return list(json.loads(got.stdout))


def test_hami_and_kai_pods(plane: ControlPlane, sched: HorusK8s, nodes: list[str]) -> None:
    v100 = "32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true"
    reg = f"GPU-aaaa,10,{v100}:GPU-bbbb,10,{v100}:"
    add_node(plane, "hami", 20, annotations={"hami.io/node-nvidia-register": reg})
    nodes.append("hami")
    add_pod(plane, NS, "hami-pod", 1, limits={"nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
    assert sched.until("the HAMi pod bound", lambda: node_of(plane, NS, "hami-pod")) == "hami"
    notes = (get_pod(plane, NS, "hami-pod") or {})["metadata"]["annotations"]
    uuid = {"0": "GPU-aaaa", "1": "GPU-bbbb"}[notes["horus.io/gpus"]]
    assert notes["hami.io/vgpu-devices-allocated"] == f"{uuid},NVIDIA,3000,30:;"
    assert notes["hami.io/vgpu-node"] == "hami" and notes["hami.io/bind-phase"] == "allocating"
    add_pod(plane, NS, "kai-pod", None, notes={"gpu-fraction": "0.5"})
    assert sched.until("the KAI pod bound", lambda: node_of(plane, NS, "kai-pod")) == "hami"
    kai = (get_pod(plane, NS, "kai-pod") or {})["metadata"]["annotations"]
    assert kai["hami.io/vgpu-devices-allocated"].endswith(",NVIDIA,16384,0:;")  # half of 32 GiB


def test_a_cordoned_node_takes_no_pod(plane: ControlPlane, sched: HorusK8s, nodes: list[str]) -> None:
    add_node(plane, "n3", 4)
    nodes.append("n3")
    plane.call("PATCH", "/api/v1/nodes/n3", {"spec": {"unschedulable": True}})
    add_pod(plane, NS, "cordoned", 1)
    reason, _ = sched.until("the wait", lambda: condition(plane, NS, "cordoned"))
    assert reason == "NodeCordoned" and node_of(plane, NS, "cordoned") is None
    plane.call("PATCH", "/api/v1/nodes/n3", {"spec": {"unschedulable": False}})
    assert sched.until("bound once uncordoned", lambda: node_of(plane, NS, "cordoned")) == "n3"


def test_a_restart_with_pods_half_bound_binds_nothing_twice(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str], tmp_path: pathlib.Path
) -> None:
    assert sched.stop(signal.SIGKILL) != 0
    for n in ("r1", "r2"):
        add_node(plane, n, 2)
        nodes.append(n)
    gang = {"horus.io/gang": "g", "horus.io/gang-size": "2"}
    # what a run killed between its binds left: both plans written, one pod bound
    plan = {"horus.io/node": "r1", "horus.io/gpus": "0,1", "horus.io/rank": "0"}
    add_pod(plane, NS, "g-0", 2, labels=gang, notes=plan, nodeName="r1")
    kubelet_runs(plane, NS, "g-0")
    add_pod(plane, NS, "g-1", 2, labels=gang, notes=plan | {"horus.io/node": "r2", "horus.io/rank": "1"})
    add_pod(plane, NS, "later", 1)
    sched.start()
    assert sched.until("the plan finished", lambda: node_of(plane, NS, "g-1"), 20) == "r2"
    # r1 and r2 are full (the gang's four GPUs): the later pod waits, nothing is bound twice
    sched.until("the later pod's wait", lambda: condition(plane, NS, "later"))
    assert node_of(plane, NS, "later") is None
    assert node_of(plane, NS, "g-0") == "r1"
    assert [e for e in events(plane, NS, "g-0") if e[0] == "Scheduled"] == []


def test_the_deployment_manifest_is_accepted_and_its_config_is_good(plane: ControlPlane) -> None:
    assert plane.apply(DEPLOY / "scheduler-deployment.yaml") == ["ConfigMap", "Deployment"]
    cm = plane.call("GET", "/api/v1/namespaces/horus-system/configmaps/horus-scheduler")
    assert cm["data"]["policy"] in policy_names()
    config = parse_config(tomllib.loads(cm["data"]["queues.toml"]))
    assert config.classes["high"].preempt and "default" in config.queues
    dep = plane.call("GET", "/apis/apps/v1/namespaces/horus-system/deployments/horus-scheduler")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "horus-scheduler"
