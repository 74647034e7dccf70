"""``horus-worker --kubernetes``: the node agent's command line (docs/kubernetes.md).

    horus-worker --kubernetes [--node-name NAME] [--kubeconfig FILE [--context C]]
                 [--namespace horus-system] [--report-interval 15] [--fake-gpus N|NxMODEL]
                 [--proc-root /proc] [--progress-dir /var/run/horus/progress] [--pod-logs DIR]
                 [--memory-watch-s 0.5] [--memory-slack-mib 256]

It does not dial a master: it follows its node's pods on the apiserver (in-cluster service
account without ``--kubeconfig``), and writes the node report ConfigMap ``horus-node-<node>`` for
horus-k8s. SIGTERM or SIGINT stops it (exit 0); a bad flag or an unreachable start exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import pathlib
import re
import signal
import sys

from horus_core import __version__
from horus_core.k8sreport import MAX_INTERVAL_S, configmap_name
from horus_core.kubeapi import Kube, KubeConfig, in_cluster, load_kubeconfig
from worker.k8s.agent import NodeAgent, NodeAgentConfig
from worker.k8s.nodeapi import NodeApi
from worker.sharing.watchdog import DEFAULT_SLACK_MIB

log = logging.getLogger("horus.worker.k8s")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse_args(argv: list[str]) -> argparse.Namespace:
    about = (
        "The Horus node agent of a Kubernetes GPU node: per-pod GPU readings and progress for "
        "horus-k8s, GPU memory caps enforced (docs/kubernetes.md)."
    )
    p = argparse.ArgumentParser(prog="horus-worker --kubernetes", description=about)
    p.add_argument("--kubernetes", action="store_true", help="run as the Kubernetes node agent (this mode)")
    p.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME", ""), help="this node (default $NODE_NAME)"
    )
    p.add_argument(
        "--kubeconfig", type=pathlib.Path, help="kubeconfig file (default: the pod's service account)"
    )
    p.add_argument("--context", default="", help="the kubeconfig context (default: its current context)")
    p.add_argument(
        "--namespace", default="horus-system", help="where the report ConfigMap goes (default horus-system)"
    )
    p.add_argument(
        "--report-interval", type=float, default=15.0, metavar="S", help="seconds between reports (15)"
    )
    p.add_argument("--fake-gpus", metavar="N|NxMODEL[,...]", help="simulated GPUs instead of NVML (demos)")
    p.add_argument(
        "--sim-interference", type=pathlib.Path, metavar="FILE", help="with --fake-gpus: pair speeds"
    )
    p.add_argument("--fake-gpu-faults", type=pathlib.Path, metavar="FILE", help="with --fake-gpus: faults")
    p.add_argument("--proc-root", type=pathlib.Path, default=pathlib.Path("/proc"), help="the host's /proc")
    p.add_argument(
        "--progress-dir",
        type=pathlib.Path,
        default=pathlib.Path("/var/run/horus/progress"),
        help="where pods write progress, one <pod uid>/progress.jsonl each (a hostPath)",
    )
    p.add_argument(
        "--pod-logs", default="/var/log/pods", metavar="DIR", help="the kubelet's pod logs ('' for none)"
    )
    p.add_argument(
        "--memory-watch-s", type=float, default=0.5, metavar="S", help="watchdog period (0.5, at most 1)"
    )
    p.add_argument(
        "--memory-slack-mib",
        type=int,
        default=DEFAULT_SLACK_MIB,
        metavar="MIB",
        help="evict above cap + this",
    )
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument("--version", action="version", version=f"horus-worker {__version__}")
    args = p.parse_args(argv)
    if not args.node_name or not _DNS.match(args.node_name):
        p.error(f"--node-name (or $NODE_NAME) must be the node's name, got {args.node_name!r}")
    try:
        configmap_name(args.node_name)
    except ValueError as exc:
        p.error(str(exc))
    if not _NAMESPACE.match(args.namespace):
        p.error(f"--namespace must be a namespace name, got {args.namespace!r}")
    if not 1.0 <= args.report_interval <= MAX_INTERVAL_S:
        p.error(f"--report-interval must be within [1, {MAX_INTERVAL_S:g}] seconds")
    if not 0.05 <= args.memory_watch_s <= 1.0 or args.memory_slack_mib < 0:
        p.error("--memory-watch-s must be within [0.05, 1] and --memory-slack-mib not negative")
    if (args.sim_interference or args.fake_gpu_faults) and not args.fake_gpus:
        p.error("--sim-interference and --fake-gpu-faults need --fake-gpus")
    args.name = args.node_name  # what worker.main.open_probe names simulated GPUs after
    args.pilot = None  # (open_probe also serves Slurm pilots; a node agent is none)
    return args


def kube_config(args: argparse.Namespace) -> KubeConfig:
    return load_kubeconfig(args.kubeconfig, args.context) if args.kubeconfig else in_cluster()


def agent_config(args: argparse.Namespace) -> NodeAgentConfig:
    return NodeAgentConfig(
        node=args.node_name,
        namespace=args.namespace,
        interval_s=args.report_interval,
        watch_s=args.memory_watch_s,
        slack_mib=args.memory_slack_mib,
        proc_root=args.proc_root,
        progress_dir=args.progress_dir,
        pod_logs=pathlib.Path(args.pod_logs) if args.pod_logs else None,
        simulated=bool(args.fake_gpus),
    )


async def serve(args: argparse.Namespace, stop: asyncio.Event, *, nvml: object = None) -> NodeAgent:
    """Run the agent until ``stop`` is set (``nvml``: a pynvml module, for tests)."""
    from worker.main import open_probe  # (worker.main hands --kubernetes over to this module)

    config = kube_config(args)
    probe, gpus, _ = await open_probe(args, nvml=nvml, proc_root=args.proc_root)
    try:
        async with Kube(config, "horus-worker/kubernetes") as kube:
            agent = NodeAgent(agent_config(args), NodeApi(kube, args.node_name, args.namespace), probe, gpus)
            kind = "simulated" if args.fake_gpus else "NVML"
            log.info(
                "horus-worker --kubernetes on node %s: %d GPU(s) (%s), apiserver %s, reports to %s/%s",
                args.node_name,
                len(gpus),
                kind,
                config.server,
                args.namespace,
                configmap_name(args.node_name),
            )
            await agent.run(stop)
            return agent
    finally:
        await probe.close()


def main(argv: list[str]) -> int:
    from worker.main import StartupError

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(args, stop)

    try:
        asyncio.run(run())
    except (StartupError, ValueError, OSError) as exc:
        print(f"horus-worker --kubernetes: error: {exc}", file=sys.stderr)
        return 2
    log.info("horus-worker --kubernetes on node %s stopped", args.node_name)
    return 0
