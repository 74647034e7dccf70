"""Two horus-k8s replicas (real subprocesses, the shipped ServiceAccount) on a real apiserver:
one leads on the Lease, the other stands by; the leader SIGKILLed while pods stream in, the
standby takes over within 15 s and binds the rest; no pod is bound twice, no GPU given twice."""

from __future__ import annotations

import pathlib
import signal
import time
from collections.abc import Iterator

import pytest

from tests.k8s.nodeplane import ControlPlane
from tests.k8s.schedplane import HorusK8s, add_node, add_pod, events, get_pod, node_of, scheduler_plane, until

NS = "ha"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/horus-system/leases/horus-k8s"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with scheduler_plane(tmp_path_factory.mktemp("k8s"), (NS,)) as p:
        for i in range(4):
            add_node(p, f"n{i}", 4)
        yield p


def _holder(plane: ControlPlane) -> str | None:
    try:
        return str(plane.call("GET", LEASE)["spec"].get("holderIdentity") or "") or None
    except OSError:
        return None


def test_the_standby_takes_over_a_sigkilled_leader_and_binds_nothing_twice(
    plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    for who in ("a", "b"):
        (tmp_path / who).mkdir()
    replicas = {who: HorusK8s(plane, tmp_path / who, "--lease-identity", who) for who in ("a", "b")}
    for r in replicas.values():
        r.start()
    try:
        leader = until("a leader", lambda: _holder(plane), 20)
        standby = "b" if leader == "a" else "a"
        names = [f"p{i}" for i in range(14)]
        for name in names[:6]:
            add_pod(plane, NS, name, 1, notes={"horus.io/exclusive": "true"})
        until("some pods bound", lambda: sum(node_of(plane, NS, n) is not None for n in names[:6]) >= 2, 20)
        assert replicas[leader].stop(signal.SIGKILL) != 0  # mid-stream
        killed = time.monotonic()
        for name in names[6:]:
            add_pod(plane, NS, name, 1, notes={"horus.io/exclusive": "true"})
        until("the standby leads", lambda: _holder(plane) == standby or None, 15)
        until("every pod bound", lambda: all(node_of(plane, NS, n) for n in names) or None, 30)
        assert time.monotonic() - killed < 15 + 30
        taken: set[tuple[str, str]] = set()
        for name in names:
            pod = get_pod(plane, NS, name) or {}
            node, notes = pod["spec"]["nodeName"], pod["metadata"]["annotations"]
            assert notes["horus.io/node"] == node
            gpu = (node, notes["horus.io/gpus"])
            assert gpu not in taken, f"GPU {gpu} given twice"
            taken.add(gpu)
            assert [r for r, _ in events(plane, NS, name)].count("Scheduled") <= 1, f"{name} bound twice"
        assert replicas[standby].alive()
    finally:
        for r in replicas.values():
            if r.alive():
                r.stop()
