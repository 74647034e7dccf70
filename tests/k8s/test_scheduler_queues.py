"""horus-k8s's gangs, queues and priority preemption on a real kube-apiserver + etcd with RBAC,
the scheduler a real subprocess under the shipped ServiceAccount with ``--queues``. This test
plays the kubelet (pods Running; terminating pods gone); nothing else is simulated.

Covered: a gang (``horus.io/gang`` + ``horus.io/gang-size``) bound all together across nodes
with its rendezvous facts, or not at all (missing pods; too little room); a queue at its quota
(``QuotaExceeded``); a high class preempting a low one through the Eviction API; a
PodDisruptionBudget that refuses the eviction (429): the pod stays, an Event says why.

(The coscheduling PodGroup's ``minMember`` is tested on the translation, test_translate.py:
this apiserver build, Go 1.19 with 1.20's vendored reflect2, crashes serving custom resources.)
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.k8s.nodeplane import ControlPlane
from tests.k8s.schedplane import (
    HorusK8s,
    add_node,
    add_pod,
    clear,
    condition,
    events,
    get_pod,
    kubelet_deletes,
    kubelet_runs,
    node_of,
    scheduler_plane,
)

pytestmark = pytest.mark.timeout(120)
NS, SMALL = "team-a", "small"
QUEUES = """
default_queue = "team-a"

[classes.low]
level = 0
default = true

[classes.high]
level = 10
preempt = true

[queues.team-a]
nominal = { "*" = 64 }

[queues.small]
nominal = { "*" = 1 }
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with scheduler_plane(tmp_path_factory.mktemp("k8s"), (NS, SMALL)) as p:
        for name, value in (("low", 0), ("high", 1000)):
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
            p.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body | {"value": value})
        yield p


@pytest.fixture(scope="module")
def sched(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HorusK8s]:
    base = tmp_path_factory.mktemp("sched")
    (base / "queues.toml").write_text(QUEUES)
    s = HorusK8s(plane, base, "--policy", "horus", "--queues", str(base / "queues.toml")).start()
    yield s
    if s.alive():
        assert s.stop() == 0, s.text()[-3000:]


@pytest.fixture
def nodes(plane: ControlPlane) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for ns in (NS, SMALL):
        clear(plane, ns, tuple(made))


def _nodes(plane: ControlPlane, made: list[str], names: tuple[str, ...], gpus: int = 2) -> None:
    for n in names:
        add_node(plane, n, gpus)
        made.append(n)


def _gang(plane: ControlPlane, name: str, size: int, count: int, gpus: int = 2) -> list[str]:
    labels = {"horus.io/gang": name, "horus.io/gang-size": str(size)}
    names = [f"{name}-{i}" for i in range(count)]
    for n in names:
        add_pod(plane, NS, n, gpus, labels=labels, notes={"horus.io/exclusive": "true"})
    return names


def test_a_gang_is_bound_all_together_across_nodes(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str]
) -> None:
    _nodes(plane, nodes, ("a1", "a2", "a3"))
    pods = _gang(plane, "train", 3, 2)  # one pod short: none is bound
    reason, message = sched.until("the held gang's wait", lambda: condition(plane, NS, pods[0]), 60)
    assert (reason, "2 of its 3 pods" in message) == ("Submitted", True)
    assert [node_of(plane, NS, p) for p in pods] == [None, None]
    add_pod(plane, NS, "train-2", 2, labels={"horus.io/gang": "train", "horus.io/gang-size": "3"})
    pods.append("train-2")
    sched.until("all bound", lambda: all(node_of(plane, NS, p) for p in pods), 30)
    assert len({node_of(plane, NS, p) for p in pods}) == 3
    notes = [(get_pod(plane, NS, p) or {})["metadata"]["annotations"] for p in pods]
    ranks = sorted(n["horus.io/env.NODE_RANK"] for n in notes)
    assert ranks == ["0", "1", "2"] and {n["horus.io/env.WORLD_SIZE"] for n in notes} == {"6"}
    assert len({(n["horus.io/env.MASTER_ADDR"], n["horus.io/env.MASTER_PORT"]) for n in notes}) == 1
    # a second gang too large for what is left: not one of its pods is bound
    add_node(plane, "a4", 2)
    nodes.append("a4")
    more = _gang(plane, "big", 2, 2)
    sched.until("the big gang's wait", lambda: condition(plane, NS, more[0]))
    assert [node_of(plane, NS, p) for p in more] == [None, None]


def test_quota_and_priority_preemption_through_evictions(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str]
) -> None:
    _nodes(plane, nodes, ("c1",))
    add_pod(plane, SMALL, "q-0", 1)
    sched.until("q-0 bound", lambda: node_of(plane, SMALL, "q-0"), 60)
    add_pod(plane, SMALL, "q-1", 1)
    assert sched.until("the quota wait", lambda: condition(plane, SMALL, "q-1"))[0] == "QuotaExceeded"
    for name in ("low-0", "low-1"):
        add_pod(plane, NS, name, 1, notes={"horus.io/exclusive": "true"}, priorityClassName="low")
    sched.until("c1 filled", lambda: node_of(plane, NS, "low-0") or node_of(plane, NS, "low-1"))
    for name in ("low-0", "low-1", "q-0"):
        if node_of(plane, NS if name != "q-0" else SMALL, name):
            kubelet_runs(plane, NS if name != "q-0" else SMALL, name)
    add_pod(plane, NS, "high", 1, notes={"horus.io/exclusive": "true"}, priorityClassName="high")

    def evicted() -> str | None:
        for name in ("low-0", "low-1"):
            pod = get_pod(plane, NS, name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return name
        return None

    victim = sched.until("a low pod evicted", evicted, 30)
    assert any(r == "Preempted" for r, _ in events(plane, NS, victim))
    kubelet_deletes(plane, NS)
    assert sched.until("the high pod bound", lambda: node_of(plane, NS, "high"), 30) == "c1"


def test_a_disruption_budget_holds_an_eviction(
    plane: ControlPlane, sched: HorusK8s, nodes: list[str], tmp_path: pathlib.Path
) -> None:
    _nodes(plane, nodes, ("d1",), gpus=1)
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "keep"}}},
    }
    plane.call("POST", f"/apis/policy/v1beta1/namespaces/{NS}/poddisruptionbudgets", pdb)
    add_pod(plane, NS, "kept", 1, labels={"app": "keep"}, priorityClassName="low")
    sched.until("kept bound", lambda: node_of(plane, NS, "kept"), 60)
    kubelet_runs(plane, NS, "kept")
    add_pod(plane, NS, "urgent", 1, priorityClassName="high", notes={"horus.io/exclusive": "true"})
    sched.until(
        "the blocked eviction's event",
        lambda: [e for e in events(plane, NS, "kept") if e[0] == "EvictionBlocked"],
        30,
    )
    pod = get_pod(plane, NS, "kept")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    assert node_of(plane, NS, "urgent") is None and sched.alive()
