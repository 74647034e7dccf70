"""``horus-k8s``: Horus as a secondary Kubernetes scheduler (docs/kubernetes.md).

    horus-k8s [--kubeconfig FILE [--context C]] [--scheduler-name horus] [--policy horus]
              [--queues FILE] [--db URL] [--tick 5] [--extender HOST:PORT]
              [--[no-]leader-elect] [--lease-namespace horus-system] [--lease-name horus-k8s]
              [--lease-identity NAME]

It places the pods whose ``spec.schedulerName`` is its name (in-cluster service account without
``--kubeconfig``); with ``--extender`` it serves kube-scheduler's extender verbs instead
(master/k8s/extender.py) for the pods of the kube-scheduler profile ``--scheduler-name``
(default-scheduler there). Replicas elect a leader on a Lease (master/k8s/lease.py): only the
leader works, and its writes are fenced by its term. ``--db``: Horus's store (a SQLite file or
a PostgreSQL URL), where the learned profiles and pair speeds are kept across restarts; the
apiserver keeps everything else. SIGTERM or SIGINT stops it (exit 0, the lease released); a bad
flag or a bad file exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import pathlib
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator

from horus_core import __version__
from horus_core.errors import InvalidArgument
from horus_core.interference import InterferenceModel, default_model
from horus_core.kubeapi import Kube, KubeConfig, in_cluster, load_kubeconfig
from horus_core.policies import Policy, make_policy, policy_names
from horus_core.queues import QueueConfig, QueuedPolicy, load_config
from master.clock import SystemClock
from master.k8s.extender import Extender
from master.k8s.extender import serve as serve_extender
from master.k8s.learning import ReportFeed
from master.k8s.lease import Elector, FencedKube
from master.k8s.scheduler import K8sScheduler
from master.learning.learner import Learner
from master.store import Store

log = logging.getLogger("horus.k8s")


def parse_args(argv: list[str]) -> argparse.Namespace:
    about = "Horus's interference-aware placement for the pods that name it (docs/kubernetes.md)."
    p = argparse.ArgumentParser(prog="horus-k8s", description=about)
    p.add_argument(
        "--kubeconfig", type=pathlib.Path, help="kubeconfig file (default: the pod's service account)"
    )
    p.add_argument("--context", default="", help="the kubeconfig context (default: its current context)")
    p.add_argument(
        "--scheduler-name",
        default="",
        help="the spec.schedulerName it serves (horus; with --extender: default-scheduler)",
    )
    p.add_argument(
        "--policy", default="horus", help=f"the placement policy (horus); one of {', '.join(policy_names())}"
    )
    p.add_argument(
        "--queues", type=pathlib.Path, help="queues, quotas and priority classes (TOML, docs/queues.md)"
    )
    p.add_argument(
        "--db", default="", help="Horus's store for learned speeds: a SQLite file or postgresql:// URL"
    )
    p.add_argument(
        "--tick", type=float, default=5.0, metavar="S", help="seconds between passes when idle (5)"
    )
    p.add_argument(
        "--extender",
        default="",
        metavar="HOST:PORT",
        help="serve kube-scheduler's extender verbs (filter, prioritize, bind) on HOST:PORT instead",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect one working replica on a coordination.k8s.io Lease (on)",
    )
    p.add_argument("--lease-namespace", default="horus-system", help="the Lease's namespace (horus-system)")
    p.add_argument("--lease-name", default="horus-k8s", help="the Lease's name (horus-k8s)")
    p.add_argument(
        "--lease-identity",
        default="",
        help="this replica's name in the Lease (default: the host name, i.e. the pod's name, so a "
        "restarted container takes its own lease back at once); distinct for every replica",
    )
    p.add_argument(
        "--namespace", default="horus-system", help="where the node agents' reports are (horus-system)"
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--version", action="version", version=f"horus-k8s {__version__}")
    return p.parse_args(argv)


def _config(args: argparse.Namespace) -> KubeConfig:
    return load_kubeconfig(args.kubeconfig, args.context) if args.kubeconfig else in_cluster()


def _policy(args: argparse.Namespace, model: InterferenceModel, queues: QueueConfig | None) -> Policy:
    policy = make_policy(args.policy, model)
    return policy if queues is None else QueuedPolicy(policy, queues)


@contextlib.asynccontextmanager
async def _learned(db: str) -> AsyncIterator[tuple[InterferenceModel, Learner]]:
    """The packaged model with what ``db`` learned, and the master's learner over that store
    (no ``db``: a store in a temporary folder, gone at exit)."""
    model = default_model()
    with tempfile.TemporaryDirectory(prefix="horus-k8s-") as tmp:
        store = await Store.open(db or str(pathlib.Path(tmp, "learned.db")))
        try:
            learner = Learner(store, SystemClock(), model)
            loaded = await learner.load()
            if db:
                log.info("interference model: %d stored observations loaded from %s", loaded, db)
            yield model, learner
        finally:
            await store.close()


def listen_address(text: str) -> tuple[str, int]:
    """HOST:PORT of ``--extender``; InvalidArgument for anything else."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument("extender", f"want HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


async def _work(
    args: argparse.Namespace,
    kube: Kube,
    policy: Policy,
    queues: QueueConfig | None,
    feed: ReportFeed,
    stop: asyncio.Event,
) -> None:
    """What a (leading) replica does: schedule, or serve the extender verbs."""
    if args.extender:
        host, port = listen_address(args.extender)
        extender = Extender(kube, policy, scheduler=args.scheduler_name or "default-scheduler")
        await serve_extender(extender, host, port, stop)
        return
    sched = K8sScheduler(
        kube,
        policy,
        name=args.scheduler_name or "horus",
        queues=queues,
        tick_s=args.tick,
        feed=feed,
        namespace=args.namespace,
    )
    await sched.run(stop)


async def serve(args: argparse.Namespace, config: KubeConfig, queues: QueueConfig | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with _learned(args.db) as (model, learner), Kube(config, agent=f"horus-k8s/{__version__}") as kube:
        policy = _policy(args, model, queues)
        feed = ReportFeed(learner)
        mode = (
            f"extender on {args.extender}"
            if args.extender
            else f"scheduler {args.scheduler_name or 'horus'!r}"
        )
        log.info("horus-k8s: %s, policy %s, on %s", mode, args.policy, config.server)
        if not args.leader_elect:
            await _work(args, kube, policy, queues, feed, stop)
            return
        identity = args.lease_identity or socket.gethostname()
        elector = Elector(kube, args.lease_namespace, args.lease_name, identity)
        fenced = FencedKube(kube, lambda: elector.leading)
        log.info("horus-k8s: %s campaigns for lease %s/%s", identity, args.lease_namespace, args.lease_name)
        await elector.run(stop, lambda: _work(args, fenced, policy, queues, feed, stop))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.tick <= 0:
            raise InvalidArgument("tick", f"must be more than 0, got {args.tick}")
        queues = load_config(str(args.queues)) if args.queues else None
        make_policy(args.policy)  # (an unknown name: refused before connecting)
        if args.extender:
            listen_address(args.extender)
        config = _config(args)
    except (InvalidArgument, ValueError, OSError) as exc:
        print(f"horus-k8s: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(args, config, queues))
    return 0


if __name__ == "__main__":
    sys.exit(main())
