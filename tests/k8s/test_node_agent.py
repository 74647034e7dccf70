"""``horus-worker --kubernetes`` against a real kube-apiserver + etcd (tests/k8s/nodeplane.py), as
the ``horus-node`` ServiceAccount with the shipped RBAC only. The GPUs are the fake pynvml of the
worker tests, their processes a fake /proc whose cgroup files name pods that exist on the
apiserver (all four kubelet layouts); this test plays the kubelet (pod status, the pod log).

One run of the agent, step by step: the report ConfigMap with each pod's use and progress (the
other node's pod left out), a foreign write to it survived, a pod over its cap evicted (really:
its deletionTimestamp) with a Kubernetes Event and an ``over_cap`` event in the report, an OOM of
its witnessed neighbour reported and not evicted, an OOM of a grower evicted. Then the command
line itself on simulated GPUs, and the DaemonSet manifest accepted by the apiserver.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import urllib.error
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from horus_core import progress
from horus_core.k8sreport import EVENT_OOM, EVENT_OVER_CAP, NodeReport, parse_report
from tests.k8s.nodeplane import NODE_TOKEN, ROOT, ControlPlane, control_plane
from tests.worker.test_nvml import fake
from worker.k8s import cli

pytestmark = pytest.mark.timeout(120)
T = TypeVar("T")
MIB = 1 << 20
NODE = "gpu-node-1"
G0 = "GPU-00000000-aaaa-bbbb-cccc-000000000000"
G1 = "GPU-11111111-aaaa-bbbb-cccc-111111111111"
WORKER = [sys.executable, "-m", "worker.main", "--kubernetes"]
ENV = os.environ | {"PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with control_plane(tmp_path_factory.mktemp("k8s")) as p:
        for ns in ("horus-system", "team"):
            p.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        assert p.apply(ROOT / "deploy" / "kubernetes" / "node-agent-rbac.yaml") == [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ]
        yield p


def _pod(plane: ControlPlane, name: str, node: str, notes: dict[str, str]) -> str:
    body = {
        "metadata": {"name": name, "annotations": notes},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "trainer"}]},
    }
    return str(plane.call("POST", "/api/v1/namespaces/team/pods", body)["metadata"]["uid"])


def _kubelet_ends(plane: ControlPlane, name: str, state: str, message: str, restarts: int) -> None:
    """Play the kubelet: the container's run ended with exit 1 (``state``: state or lastState)."""
    pod = plane.call("GET", f"/api/v1/namespaces/team/pods/{name}")
    ended = {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}
    status = {"name": "main", "ready": False, "restartCount": restarts, "image": "trainer", "imageID": ""}
    status |= {state: ended} | (
        {"state": {"waiting": {"reason": "CrashLoopBackOff"}}} if state == "lastState" else {}
    )
    pod["status"] = {"phase": "Running", "containerStatuses": [status]}
    plane.call("PUT", f"/api/v1/namespaces/team/pods/{name}/status", pod)


def _cgroup(proc: pathlib.Path, pid: int, text: str) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(text)


async def _until(what: str, probe: Callable[[], T | None], within_s: float = 10.0) -> T:
    """Poll ``probe`` (blocking: run in a thread) until it gives a value."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        got = await asyncio.to_thread(probe)
        if got is not None:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _report(plane: ControlPlane, node: str = NODE) -> NodeReport | None:
    try:
        cm = plane.call("GET", f"/api/v1/namespaces/horus-system/configmaps/horus-node-{node}")
    except urllib.error.HTTPError:
        return None
    try:
        return parse_report(cm.get("data", {}).get("report.json", ""))
    except ValueError:
        return None


def _deleting(plane: ControlPlane, name: str) -> bool:
    pod = plane.call("GET", f"/api/v1/namespaces/team/pods/{name}")
    return bool(pod["metadata"].get("deletionTimestamp"))


async def _report_where(plane: ControlPlane, what: str, ok: Callable[[NodeReport], bool]) -> NodeReport:
    return await _until(what, lambda: r if (r := _report(plane)) is not None and ok(r) else None)


async def test_the_agent_reports_and_enforces_caps_on_a_real_apiserver(
    plane: ControlPlane, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uid = {
        "grower": _pod(plane, "grower", NODE, {"horus.io/gpu-memory": "4GiB", "horus.io/gpus": "0"}),
        "steady": _pod(plane, "steady", NODE, {"hami.io/vgpu-devices-allocated": f"{G0},NVIDIA,6000,0:;"}),
        "solo": _pod(plane, "solo", NODE, {}),
        "partner": _pod(plane, "partner", NODE, {"horus.io/gpu-memory": "2GiB"}),
        "elsewhere": _pod(plane, "elsewhere", "gpu-node-2", {}),
    }
    und = {k: v.replace("-", "_") for k, v in uid.items()}
    proc, progress_dir, logs = tmp_path / "proc", tmp_path / "progress", tmp_path / "pods"
    # the four kubelet layouts, one per pod (cgroup v1/v2 x cgroupfs/systemd)
    _cgroup(
        proc,
        1001,
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{und['grower']}.slice/cri-containerd-a.scope\n",
    )
    _cgroup(
        proc,
        2001,
        f"7:memory:/kubepods/besteffort/pod{uid['steady']}/b\n1:name=systemd:/kubepods/besteffort/pod{uid['steady']}/b\n",
    )
    _cgroup(proc, 3001, f"4:pids:/kubepods.slice/kubepods-pod{und['solo']}.slice/crio-c.scope\n")
    _cgroup(proc, 5001, f"0::/kubepods/burstable/pod{uid['partner']}/e\n")
    _cgroup(proc, 4001, f"0::/kubepods/pod{uid['elsewhere']}/d\n")  # (NVML would not show it here)
    grower = fake.c_nvmlProcessInfo_t(1001, 3000 * MIB)
    fake.reset(
        [
            fake.FakeGpu(
                G0,
                name="Tesla V100-SXM2-16GB",
                total_bytes=16384 * MIB,
                used_bytes=8600 * MIB,
                util_gpu=70,
                processes=[grower, fake.c_nvmlProcessInfo_t(2001, 5000 * MIB)],
                samples=[fake.c_nvmlProcessUtilizationSample_t(1001, 10, 40)],
            ),
            fake.FakeGpu(
                G1,
                name="Tesla V100-SXM2-16GB",
                total_bytes=16384 * MIB,
                processes=[
                    fake.c_nvmlProcessInfo_t(p, m * MIB) for p, m in ((3001, 8000), (5001, 1000), (4001, 700))
                ],
            ),
        ]
    )
    (progress_dir / uid["solo"]).mkdir(parents=True)  # (the kubelet makes it: subPathExpr)
    monkeypatch.setenv(progress.PROGRESS_ENV, str(progress_dir / uid["solo"] / "progress.jsonl"))
    progress.report(10, samples_per_s=50.0)
    progress.report(42, loss=0.5, samples_per_s=123.5)
    (progress_dir / "00000000-0000-0000-0000-00000000dead").mkdir()  # a pod long gone

    args = cli.parse_args(
        [
            "--kubernetes",
            "--node-name",
            NODE,
            "--kubeconfig",
            str(plane.kubeconfig(tmp_path / "kc", NODE_TOKEN)),
            "--report-interval",
            "1",
            "--memory-watch-s",
            "0.1",
            "--proc-root",
            str(proc),
            "--progress-dir",
            str(progress_dir),
            "--pod-logs",
            str(logs),
        ]
    )
    stop = asyncio.Event()
    agent = asyncio.ensure_future(cli.serve(args, stop, nvml=fake))
    try:
        await _steps(plane, uid, logs, grower)
        assert not (progress_dir / "00000000-0000-0000-0000-00000000dead").exists()
        assert (progress_dir / uid["solo"]).exists()
    finally:
        stop.set()
        await asyncio.wait_for(agent, 15)


async def _steps(plane: ControlPlane, uid: dict[str, str], logs: pathlib.Path, grower: Any) -> None:
    first = await _report_where(plane, "the first report", lambda r: len(r.pods) == 4)
    pods = {p.name: p for p in first.pods}
    assert [(g.uuid, g.index, g.mem_total_mib) for g in first.gpus] == [(G0, 0, 16384), (G1, 1, 16384)]
    assert first.gpus[0].util == 70.0 and first.interval_s == 1.0 and first.events == ()
    assert set(pods) == {"grower", "steady", "solo", "partner"}, "the other node's pod is not ours"
    assert (pods["grower"].uid, pods["grower"].gpus, pods["grower"].mem_used_mib, pods["grower"].util) == (
        uid["grower"],
        (G0,),
        3000,
        40.0,
    )
    assert (pods["steady"].mem_used_mib, pods["solo"].mem_used_mib, pods["partner"].gpus) == (
        5000,
        8000,
        (G1,),
    )
    assert (pods["solo"].step, pods["solo"].samples_per_s, pods["grower"].step) == (42, 123.5, None)

    # someone else writes the ConfigMap: the agent's next write re-reads its version and lands
    cm = plane.call("GET", f"/api/v1/namespaces/horus-system/configmaps/horus-node-{NODE}")
    cm["data"] = {"report.json": "{}"}
    plane.call("PUT", f"/api/v1/namespaces/horus-system/configmaps/horus-node-{NODE}", cm)
    await _report_where(plane, "a report after a foreign write", lambda r: r.time > first.time)

    # the grower goes over its cap (4 GiB + 256 MiB slack) next to "steady": evicted
    grower.usedGpuMemory = 5000 * MIB
    await _until("the eviction of grower", lambda: True if _deleting(plane, "grower") else None, 5.0)
    events = plane.call(
        "GET", f"/api/v1/namespaces/team/events?fieldSelector=involvedObject.uid={uid['grower']}"
    )
    (event,) = events["items"]
    assert (event["reason"], event["type"], event["source"]["component"]) == (
        "GpuMemoryExceeded",
        "Warning",
        "horus-node",
    )
    assert "used 5000 MiB of GPU memory" in event["message"]
    over = await _report_where(
        plane, "the over_cap event", lambda r: any(e.kind == EVENT_OVER_CAP for e in r.events)
    )
    (e,) = over.events
    assert (e.uid, e.gpu, e.mem_used_mib, e.cap_mib, e.shared) == (uid["grower"], G0, 5000, 4096, True)

    # "steady" shared G0 with it and runs out of memory: a victim, reported, restarted in place
    _kubelet_ends(plane, "steady", "lastState", "torch.OutOfMemoryError: CUDA out of memory.", 1)
    oom = await _report_where(plane, "steady's oom", lambda r: any(e.kind == EVENT_OOM for e in r.events))
    victim = next(e for e in oom.events if e.kind == EVENT_OOM)
    assert (victim.uid, victim.shared, victim.neighbour_over_cap, victim.cap_mib) == (
        uid["steady"],
        True,
        True,
        6000,
    )
    assert not _deleting(plane, "steady")

    # "solo" shares G1 with "partner", nobody over a cap, and its log shows CUDA's OOM: a grower,
    # evicted so that it runs again alone (the termination message is empty: the log tells)
    d = logs / f"team_solo_{uid['solo']}" / "main"
    d.mkdir(parents=True)
    (d / "0.log").write_text("2026-01-01T00:00:00Z stderr F RuntimeError: CUDA error: out of memory\n")
    _kubelet_ends(plane, "solo", "state", "", 0)
    await _until("the eviction of solo", lambda: True if _deleting(plane, "solo") else None, 5.0)
    last = await _report_where(plane, "solo's oom", lambda r: sum(e.kind == EVENT_OOM for e in r.events) == 2)
    solo = [e for e in last.events if e.uid == uid["solo"]]
    assert [(e.kind, e.shared, e.neighbour_over_cap, e.mem_used_mib) for e in solo] == [
        (EVENT_OOM, True, False, 8000)
    ]
    assert not _deleting(plane, "partner") and not _deleting(plane, "steady")


def test_the_command_line_on_simulated_gpus(plane: ControlPlane, tmp_path: pathlib.Path) -> None:
    notes = {
        "horus.io/gpus": "1",
        "horus.io/job-type": "ResNet-18 (batch size 32)",
        "horus.io/gpu-memory": "2GiB",
    }
    uid = _pod(plane, "sim-trainer", "sim-node", notes)
    kubeconfig = str(plane.kubeconfig(tmp_path / "kc", NODE_TOKEN))
    argv = [*WORKER, "--fake-gpus", "2xV100", "--node-name", "sim-node", "--kubeconfig", kubeconfig]
    argv += ["--report-interval", "1", "--progress-dir", str(tmp_path), "--pod-logs", ""]
    agent = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    try:
        report = asyncio.run(_until("the simulated node's report", lambda: _report(plane, "sim-node"), 30.0))
        (pod,) = report.pods
        assert (pod.uid, pod.gpus) == (uid, (report.gpus[1].uuid,)) and 0 < pod.mem_used_mib <= 2048
        assert report.gpus[1].mem_used_mib == pod.mem_used_mib and report.gpus[0].mem_used_mib == 0
    finally:
        agent.send_signal(signal.SIGTERM)
        out, _ = agent.communicate(timeout=15)
    assert agent.returncode == 0, out.decode()[-3000:]
    assert plane.apply(ROOT / "deploy" / "kubernetes" / "node-agent-daemonset.yaml") == ["DaemonSet"]


def test_a_bad_kubeconfig_exits_2(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    argv = [*WORKER, "--fake-gpus", "1", "--node-name", "n", "--kubeconfig", str(bad)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 2 and "kubeconfig: no context named ''" in done.stderr, done.stderr[-2000:]
