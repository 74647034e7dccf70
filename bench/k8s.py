"""Pods bound per second on a real apiserver: kube-scheduler 1.20 and horus-k8s, same plane, same run.

One control plane (scripts/k8s-dev.sh: etcd + kube-apiserver 1.20 + kube-scheduler 1.20, its
client allowed --scheduler-qps requests per second), ``--nodes`` fake nodes of ``--gpus`` V100s
each (Ready, untainted: no kubelet, none is needed to bind). Three phases, each in its own
namespace on its own fresh nodes (the last phase's nodes and unbound pods deleted, kube-scheduler
stopped once its phase is done):

1. ``kube-scheduler``: ``--pods`` single-GPU pods (``nvidia.com/gpu: 1``, its own counting);
2. ``horus-k8s``: the same pods for ``schedulerName: horus``, ``horus.io/exclusive: "true"``
   (horus-k8s as a subprocess under the shipped ServiceAccount, leader election on);
3. ``horus-k8s sharing``: ``--pods`` single-GPU pods with job types of the packaged pair table
   (``horus.io/job-type``), which Horus may pack two to a GPU.

Pods are created ``--create-concurrency`` at a time; a watch started before the first one sees
each binding. Per phase one JSON line: {"bench": "k8s", "scheduler", "pods", "bound",
"pods_per_s" (bound / first creation to last binding), "p50_s", "p99_s" (creation asked ->
binding seen), "gpus_used", "pods_per_gpu"}; then {"ratio": "horus/kube-scheduler"} lines.

    python bench/k8s.py [--nodes 500] [--gpus 8] [--pods 5000] [--phases kube,horus,sharing]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from horus_core.interference.table import packaged_table  # noqa: E402
from horus_core.kubeapi import Kube, KubeError, load_kubeconfig  # noqa: E402

SCRIPT = ROOT / "scripts" / "k8s-dev.sh"
DEPLOY = ROOT / "deploy" / "kubernetes"
SA_TOKEN = "horus-bench-scheduler"
V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.memory": "16160"}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--phases", default="kube,horus,sharing")
    p.add_argument("--create-concurrency", type=int, default=32)
    p.add_argument("--scheduler-qps", type=int, default=1000, help="kube-scheduler's client QPS and burst")
    p.add_argument("--settle-s", type=float, default=20.0, help="how long to wait after the last binding")
    p.add_argument("--timeout-s", type=float, default=600.0, help="per phase")
    p.add_argument("--keep", action="store_true", help="keep the plane's folder (logs)")
    return p.parse_args(argv)


def start_plane(base: pathlib.Path, qps: int) -> pathlib.Path:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": qps, "burst": qps},
        "leaderElection": {"leaderElect": False},
    }
    (base / "scheduler.yaml").write_text(yaml.safe_dump(config))
    sa = "system:serviceaccount:horus-system:horus-scheduler"
    groups = '"system:serviceaccounts,system:serviceaccounts:horus-system"'
    (base / "extra.csv").write_text(f"{SA_TOKEN},{sa},bench-sa-uid,{groups}\n")
    argv = ["bash", str(SCRIPT), "start", str(base / "plane"), "--tokens", str(base / "extra.csv")]
    subprocess.run([*argv, "--scheduler", str(base / "scheduler.yaml")], check=True, stdout=sys.stderr)
    return base / "plane"


def sa_kubeconfig(plane: pathlib.Path) -> pathlib.Path:
    doc = yaml.safe_load((plane / "admin.kubeconfig").read_text())
    doc["users"][0]["user"]["token"] = SA_TOKEN
    path = plane / "horus-scheduler.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


async def bounded(n: int, jobs: Sequence[Any]) -> list[Any]:
    sem = asyncio.Semaphore(n)

    async def one(job: Any) -> Any:
        async with sem:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))


_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


async def setup(kube: Kube, phases: Sequence[str]) -> None:
    for name in ("namespace.yaml", "scheduler-rbac.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            ns = (doc.get("metadata") or {}).get("namespace", "default")
            await kube.request("POST", _PATHS[doc["kind"]].format(ns=ns), doc)
    for ph in phases:
        await kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": f"bench-{ph}"}})


def node_names(args: argparse.Namespace, phase: str) -> list[str]:
    return [f"{phase}-{i:04d}" for i in range(args.nodes)]


async def _node(kube: Kube, name: str, gpus: int) -> None:
    await kube.request("POST", "/api/v1/nodes", {"metadata": {"name": name, "labels": V100}})
    await kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    res = {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"}
    ready = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    await kube.patch(
        f"/api/v1/nodes/{name}/status", {"status": {"capacity": res, "allocatable": res, "conditions": ready}}
    )


def pod(name: str, phase: str, job_type: str) -> dict[str, Any]:
    notes = {"horus.io/exclusive": "true"} if phase == "horus" else {}
    notes |= {"horus.io/job-type": job_type} if phase == "sharing" else {}
    res = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "100m", "memory": "256Mi"}}
    container = {"name": "main", "image": "trainer", "resources": res}
    scheduler = "default-scheduler" if phase == "kube" else "horus"
    return {
        "metadata": {"name": name, "annotations": notes},
        "spec": {"schedulerName": scheduler, "containers": [container], "terminationGracePeriodSeconds": 0},
    }


async def watch_bindings(kube: Kube, ns: str, rv: str, seen: dict[str, float], gpus: dict[str, str]) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    while True:
        try:
            async for ev in kube.watch(path, {"resourceVersion": rv, "timeoutSeconds": "300"}):
                obj = ev.get("object") or {}
                meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
                rv = str(meta.get("resourceVersion") or rv)
                name = str(meta.get("name"))
                if spec.get("nodeName") and name not in seen:
                    seen[name] = time.monotonic()
                    gpus[name] = (
                        f"{spec['nodeName']}/{(meta.get('annotations') or {}).get('horus.io/gpus', '')}"
                    )
        except (TimeoutError, KubeError, OSError):
            await asyncio.sleep(0.2)


async def phase(kube: Kube, args: argparse.Namespace, name: str) -> tuple[dict[str, Any], list[str]]:
    """One phase on its own fresh nodes: its summary, and the pods left unbound."""
    ns = f"bench-{name}"
    await bounded(16, [_node(kube, n, args.gpus) for n in node_names(args, name)])
    listed = await kube.request("GET", f"/api/v1/namespaces/{ns}/pods")
    seen: dict[str, float] = {}
    gpus: dict[str, str] = {}
    watcher = asyncio.ensure_future(
        watch_bindings(kube, ns, str(listed["metadata"]["resourceVersion"]), seen, gpus)
    )
    types = list(packaged_table().job_types)
    rng = random.Random(7)
    created: dict[str, float] = {}

    async def create(i: int) -> None:
        body = pod(f"p{i:05d}", name, rng.choice(types))
        sent = time.monotonic()  # (the pod exists from some moment before the answer: count from the ask)
        await kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
        created[body["metadata"]["name"]] = sent

    start = time.monotonic()
    await bounded(args.create_concurrency, [create(i) for i in range(args.pods)])
    fits = min(args.pods, args.nodes * args.gpus * (2 if name == "sharing" else 1))
    deadline, last, quiet_since = time.monotonic() + args.timeout_s, -1, time.monotonic()
    while time.monotonic() < deadline and len(seen) < args.pods:  # until all bound or quiet
        await asyncio.sleep(1.0)
        if len(seen) != last:
            last, quiet_since = len(seen), time.monotonic()
        elif len(seen) >= fits or time.monotonic() - quiet_since > args.settle_s:
            break
    watcher.cancel()
    return summary(name, args.pods, start, created, seen, gpus), sorted(set(created) - set(seen))


def summary(
    name: str,
    pods: int,
    start: float,
    created: dict[str, float],
    seen: dict[str, float],
    gpus: dict[str, str],
) -> dict[str, Any]:
    lat = sorted(seen[n] - created[n] for n in seen if n in created)
    span = (max(seen.values()) - start) if seen else 0.0
    used = len({g for g in gpus.values()}) if name != "kube" else 0

    def q(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 3) if lat else None

    return {
        "bench": "k8s",
        "scheduler": {"kube": "kube-scheduler", "horus": "horus-k8s", "sharing": "horus-k8s sharing"}[name],
        "pods": pods,
        "bound": len(seen),
        "pods_per_s": round(len(seen) / span, 1) if span > 0 else 0.0,
        "p50_s": q(0.50),
        "p99_s": q(0.99),
        "gpus_used": used or None,
        "pods_per_gpu": round(len(seen) / used, 2) if used else None,
    }


async def retire(kube: Kube, args: argparse.Namespace, name: str, unbound: Sequence[str]) -> None:
    """Take a phase out of the next one's way: delete its nodes (pods bound there are then
    nobody's concern: no kubelet, no pod GC) and its unbound pods, one by one. (No big JSON
    lists: the shared 1.20.2 apiserver can fault encoding them, see scripts/k8s-build.sh.)"""

    async def delete(path: str) -> None:
        with contextlib.suppress(TimeoutError, KubeError, OSError):
            await kube.request("DELETE", path, params={"gracePeriodSeconds": "0"})

    jobs = [delete(f"/api/v1/namespaces/bench-{name}/pods/{p}") for p in unbound]
    jobs += [delete(f"/api/v1/nodes/{n}") for n in node_names(args, name)]
    await bounded(16, jobs)


def stop_kube_scheduler(plane: pathlib.Path) -> None:
    pid = plane / "scheduler.pid"
    if pid.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid.read_text().strip()), 9)
        pid.unlink()


def start_horus(kubeconfig: pathlib.Path, log: pathlib.Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "master.k8s.main",
        "--kubeconfig",
        str(kubeconfig),
        "--log-level",
        "WARNING",
    ]
    with open(log, "ab") as out:
        env = os.environ | {"PYTHONPATH": str(ROOT)}
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


async def run(args: argparse.Namespace, plane: pathlib.Path) -> list[dict[str, Any]]:
    phases = [p for p in args.phases.split(",") if p]
    out: list[dict[str, Any]] = []
    async with Kube(load_kubeconfig(plane / "admin.kubeconfig"), "horus-bench") as kube:
        await setup(kube, phases)
        horus: subprocess.Popen[bytes] | None = None
        try:
            for name in phases:
                if name != "kube" and horus is None:
                    stop_kube_scheduler(plane)  # (its pods left pending would take the next nodes)
                    horus = start_horus(sa_kubeconfig(plane), plane / "horus-k8s.log")
                    await asyncio.sleep(3.0)  # (its lease and first lists)
                row, unbound = await phase(kube, args, name)
                out.append(row)
                print(json.dumps(row | {"nodes": args.nodes, "gpus_per_node": args.gpus}), flush=True)
                await retire(kube, args, name, unbound)
        finally:
            if horus is not None:
                horus.terminate()
                horus.wait(15)
    return out


def ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {r["scheduler"]: r for r in rows}
    ks, hk = by.get("kube-scheduler"), by.get("horus-k8s")
    if not ks or not hk or not ks["pods_per_s"]:
        return []
    return [
        {
            "bench": "k8s",
            "ratio": "horus/kube-scheduler",
            "pods_per_s": round(hk["pods_per_s"] / ks["pods_per_s"], 2),
            "p99_s": round(hk["p99_s"] / ks["p99_s"], 2) if hk["p99_s"] and ks["p99_s"] else None,
            "goal_met": hk["pods_per_s"] >= ks["pods_per_s"] and (hk["p99_s"] or 99.0) <= 2.0,
        }
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    base = pathlib.Path(tempfile.mkdtemp(prefix="horus-bench-k8s-"))
    plane = base / "plane"
    try:
        plane = start_plane(base, args.scheduler_qps)
        rows = asyncio.run(run(args, plane))
        for r in ratios(rows):
            print(json.dumps(r), flush=True)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(plane)], check=False)
        if args.keep:
            print(f"bench/k8s.py: logs kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
