"""``hctl pods [--kubeconfig FILE] [-n NAMESPACE | -A] [--scheduler-name horus]``: the pods
horus-k8s schedules, straight from the apiserver (no master): where each runs, on which GPUs,
and why a pending one waits (its ``PodScheduled=False`` reason and message, docs/kubernetes.md).
"""

from __future__ import annotations

import argparse
import os
import pathlib
from collections.abc import Mapping
from typing import Any

from horus_core.cli.base import Subparsers
from horus_core.cli.output import Output
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument, Unavailable


def register(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    del common  # (no master: the apiserver's credentials instead)
    text = "the pods horus-k8s schedules: node, GPUs, and why a pending one waits (no master)"
    p = sub.add_parser("pods", help=text, description=text)
    p.set_defaults(func=list_pods, interrupt_ok=False, offline=True)
    default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(
        pathlib.Path.home() / ".kube" / "config"
    )
    p.add_argument(
        "--kubeconfig", type=pathlib.Path, default=pathlib.Path(default), help=f"(default {default})"
    )
    p.add_argument("--context", default="", help="the kubeconfig context (default: its current context)")
    p.add_argument(
        "--scheduler-name", default="horus", help="the pods whose spec.schedulerName is this (horus)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", default="", help="one namespace (default: every one)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", dest="pods_output")


async def list_pods(_client: HorusClient | None, args: argparse.Namespace, out: Output) -> int:
    from horus_core.kubeapi import Kube, KubeError, load_kubeconfig  # (aiohttp: only for this command)

    try:
        config = load_kubeconfig(args.kubeconfig, args.context)
    except ValueError as exc:
        raise InvalidArgument("kubeconfig", str(exc)) from None
    path = f"/api/v1/namespaces/{args.namespace}/pods" if args.namespace else "/api/v1/pods"
    try:
        async with Kube(config, agent="hctl") as kube:
            got = await kube.request(
                "GET", path, params={"fieldSelector": f"spec.schedulerName={args.scheduler_name}"}
            )
    except (KubeError, OSError, TimeoutError) as exc:
        raise Unavailable(f"the apiserver at {config.server}: {exc}") from None
    rows = [pod_row(p) for p in got.get("items") or [] if isinstance(p, dict)]
    if args.pods_output == "json":
        out.dump(rows)
        return 0
    if not rows:
        out.line(f"no pods with schedulerName {args.scheduler_name}")
        return 0
    out.table(
        ("NAMESPACE", "POD", "PHASE", "NODE", "GPUS", "WHY"),
        [
            (r["namespace"], r["name"], r["phase"], r["node"] or "-", r["gpus"] or "-", r["why"] or "")
            for r in rows
        ],
    )
    return 0


def pod_row(pod: Mapping[str, Any]) -> dict[str, str]:
    """What ``hctl pods`` shows of one pod."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    notes = meta.get("annotations") or {}
    why = ""
    if not spec.get("nodeName"):
        for c in status.get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False":
                why = f"{c.get('reason', '')}: {c.get('message', '')}"
    return {
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta.get("name", "")),
        "phase": str(status.get("phase", "")),
        "node": str(spec.get("nodeName") or ""),
        "gpus": str(notes.get("horus.io/gpus", "")),
        "why": why,
    }
