"""``horus-master``: the daemon's command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import pathlib
import signal
import sqlite3
import sys

from horus_core.errors import InvalidArgument
from horus_core.floor import DEFAULT_MIN_SPEED
from horus_core.interference.table import load_table
from horus_core.policies import OBJECTIVES, add_policy_module_option, load_policy_module, policy_names
from horus_core.queues import load_config
from master import gctune
from master.app import Master
from master.auth import TokenTable
from master.config import OPEN_WORKER_PLANE, MasterConfig, leader_lease_problem, timeout_problem
from master.ha import HaMaster
from master.ports import check_free, listen_addresses
from master.store.target import parse_db, sqlite_file_problem

log = logging.getLogger("master")


REPLAN_ENV = "HORUS_OPTIMUS_REPLAN_S"


def _env_float(key: str) -> float | None:
    """A number from the environment (None if unset); a bad value fails at start, named."""
    text = os.environ.get(key, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"horus-master: ${key} must be a number, got {text!r}") from None


def default_policy() -> str:
    return "horus" if "horus" in policy_names() else "fifo"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="horus-master", description="The Horus master daemon.")
    p.add_argument(
        "--listen",
        default="127.0.0.1:50051",
        help="HOST[:PORT] to serve on (default 127.0.0.1:50051, where hctl looks; no port: 50051; "
        "port 0: any free port)",
    )
    p.add_argument(
        "--db",
        required=True,
        help="SQLite database file, or postgresql://user@host:port/db: masters sharing one PostgreSQL "
        "elect a leader; the others stand by (docs/ha.md)",
    )
    p.add_argument(
        "--leader-lease-s",
        type=float,
        default=10.0,
        metavar="S",
        help="PostgreSQL: the leader's lease, renewed every third of it; a standby takes over within "
        "about one lease of the leader's death (default 10)",
    )
    p.add_argument(
        "--advertise",
        default="",
        metavar="HOST:PORT",
        help="PostgreSQL: where clients and workers reach this master when it leads (default: --listen)",
    )
    p.add_argument("--policy", default=None, help=f"scheduling policy (one of: {', '.join(policy_names())})")
    add_policy_module_option(p)
    p.add_argument("--data-dir", type=pathlib.Path, default=None, help="for logs (default: the db folder)")
    p.add_argument("--tick-s", type=float, default=1.0, help="scheduling pass interval")
    p.add_argument("--node-timeout-s", type=float, default=30.0, help="silence after which a node is LOST")
    p.add_argument("--lease-s", type=float, default=20.0, help="workers stop attempts after this cut-off")
    p.add_argument("--heartbeat-s", type=float, default=2.0, help="heartbeat interval asked of the workers")
    p.add_argument(
        "--kill-grace-s",
        type=float,
        default=None,
        help="SIGTERM -> SIGKILL grace when a lease expires (default 5, or what --node-timeout-s leaves)",
    )
    p.add_argument("--join-token", default=None, help="token workers must present to register")
    p.add_argument("--auth-tokens", type=pathlib.Path, default=None, help="lines 'token user [admin]'")
    p.add_argument("--tls-cert", type=pathlib.Path, help="server certificate (PEM); enables TLS")
    p.add_argument("--tls-key", type=pathlib.Path, help="the server certificate's private key (PEM)")
    p.add_argument(
        "--tls-client-ca",
        type=pathlib.Path,
        help="mutual TLS: require client/worker certificates signed by this CA",
    )
    p.add_argument(
        "--allow-mount",
        action="append",
        default=[],
        metavar="PREFIX",
        help="host path prefix job specs may mount (repeatable; default: no host mounts)",
    )
    p.add_argument(
        "--gang-ports",
        type=_port_range,
        default=(29500, 29999),
        metavar="LO-HI",
        help="ports a multi-node gang's MASTER_PORT is chosen from (default 29500-29999)",
    )
    p.add_argument("--http-listen", metavar="HOST:PORT", help="serve the web dashboard here (off by default)")
    p.add_argument("--metrics-listen", metavar="HOST:PORT", help="serve Prometheus /metrics here (no auth)")
    p.add_argument(
        "--max-concurrent-rpcs",
        type=int,
        default=4096,
        help="bound on in-flight RPCs, every worker stream and watcher included (default 4096)",
    )
    p.add_argument(
        "--min-speed",
        type=float,
        default=DEFAULT_MIN_SPEED,
        metavar="FRACTION",
        help="cluster default speed floor in [0, 1] for jobs submitted without one: no job that shares a "
        f"GPU runs below this fraction of its solo speed (default {DEFAULT_MIN_SPEED:g}; 0: none; "
        "docs/sharing.md)",
    )
    p.add_argument(
        "--optimus-replan-s",
        type=float,
        default=_env_float(REPLAN_ENV),
        metavar="SECONDS",
        help=f"how often the optimus policy re-plans GPU counts (default 600, or ${REPLAN_ENV})",
    )
    p.add_argument(
        "--queues",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="queues, quotas and priority classes (TOML, docs/queues.md); SIGHUP reloads it",
    )
    p.add_argument(
        "--min-run-s",
        type=float,
        default=0.0,
        metavar="S",
        help="no attempt is preempted for quotas or priorities before it has run this long (default 0)",
    )
    p.add_argument(
        "--round-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="round length of the gavel-* policies (default: $HORUS_GAVEL_ROUND_S, else 360)",
    )
    p.add_argument(
        "--throughputs",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="a measured pair table in Gavel's format instead of the packaged one (docs/prediction.md)",
    )
    p.add_argument(
        "--objective",
        default="jct",
        choices=OBJECTIVES,
        help="what the horus policy serves: each job's completion time (jct, the default) or the whole "
        "queue's (makespan: longest work first, docs/policies.md); other policies ignore it",
    )
    p.add_argument("--no-group-commit", action="store_true", help="commit each write alone (benchmarks)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = p.parse_args(argv)
    try:
        listen_addresses(args)
    except ValueError as exc:
        p.error(str(exc))
    for path in args.policy_module:
        try:
            load_policy_module(str(path))
        except InvalidArgument as exc:
            p.error(f"--policy-module: {exc}")
    try:
        args.target = parse_db(args.db)
    except ValueError as exc:
        p.error(str(exc))
    if args.target.path is not None and (why := sqlite_file_problem(args.target.path)) is not None:
        p.exit(2, f"horus-master: {why}\n")  # (one line, no usage: the flag was given, its file is bad)
    if not (math.isfinite(args.leader_lease_s) and args.leader_lease_s >= 1.0):
        p.error(f"--leader-lease-s must be at least 1 s, got {args.leader_lease_s}")
    problem = leader_lease_problem(
        args.target.url, args.leader_lease_s, args.heartbeat_s, args.node_timeout_s
    )
    if problem is not None:
        p.error(problem)
    args.policy = args.policy or default_policy()
    if args.policy not in policy_names():
        p.error(f"unknown policy {args.policy!r}; choose one of {', '.join(policy_names())}")
    if bool(args.tls_cert) != bool(args.tls_key) or (args.tls_client_ca and not args.tls_cert):
        p.error("--tls-cert and --tls-key go together; --tls-client-ca needs them")
    for path in (args.tls_cert, args.tls_key, args.tls_client_ca):
        if path is not None and not path.is_file():
            p.error(f"no such file: {path}")
    problem = timeout_problem(
        args.tick_s, args.heartbeat_s, args.lease_s, args.node_timeout_s, args.kill_grace_s
    )
    if problem is not None:
        p.error(problem)
    if args.auth_tokens is not None and args.join_token is None and args.tls_client_ca is None:
        p.error(OPEN_WORKER_PLANE)
    replan = args.optimus_replan_s
    if replan is not None and not (math.isfinite(replan) and replan >= 0):
        p.error(f"--optimus-replan-s must be a number >= 0, got {replan}")
    if not (math.isfinite(args.min_speed) and 0.0 <= args.min_speed <= 1.0):
        p.error(f"--min-speed must be within [0, 1], got {args.min_speed}")
    if not (math.isfinite(args.min_run_s) and args.min_run_s >= 0.0):
        p.error(f"--min-run-s must be a number of seconds >= 0, got {args.min_run_s}")
    if args.queues is not None:
        try:
            load_config(str(args.queues))
        except InvalidArgument as exc:
            p.error(f"--queues: {exc}")
    if args.throughputs is not None:
        try:
            load_table(args.throughputs)  # (checked here: a bad table never starts a master)
        except InvalidArgument as exc:
            p.error(f"--throughputs: {exc}")
    if args.round_s is not None and not (math.isfinite(args.round_s) and args.round_s > 0):
        p.error(f"--round-s must be a positive number of seconds, got {args.round_s}")
    return args


def config_from(args: argparse.Namespace) -> MasterConfig:
    target = args.target
    return MasterConfig(
        db_path=target.path if target.path is not None else pathlib.Path("horus.db"),
        db_url=target.url,
        leader_lease_s=args.leader_lease_s,
        advertise=args.advertise,
        listen=args.listen,
        policy=args.policy,
        data_dir=args.data_dir,
        tick_s=args.tick_s,
        node_timeout_s=args.node_timeout_s,
        lease_s=args.lease_s,
        heartbeat_s=args.heartbeat_s,
        kill_grace_s=args.kill_grace_s,
        join_token=args.join_token,
        auth_tokens=args.auth_tokens,
        group_commit=not args.no_group_commit,
        max_concurrent_rpcs=args.max_concurrent_rpcs,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        allow_mounts=tuple(args.allow_mount),
        min_speed=args.min_speed,
        optimus_replan_s=args.optimus_replan_s,
        queues=args.queues,
        min_run_s=args.min_run_s,
        round_s=args.round_s,
        objective=args.objective,
        gang_ports=args.gang_ports,
        throughputs=args.throughputs,
    )


def _port_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        out = (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO-HI, got {text!r}") from None
    if not 0 < out[0] <= out[1] < 65536:
        raise argparse.ArgumentTypeError(f"expected a port range within 1-65535, got {text!r}")
    return out


_reloads: set[asyncio.Task[bool]] = set()  # (referenced until done: the loop keeps weak ones)


def _reload(master: Master | None) -> None:
    """SIGHUP: reload the queue file between two passes (a task: the handler must not block)."""
    if master is None:  # (a standby: it reads the file when it leads)
        return
    task = asyncio.ensure_future(master.reload_queues())
    _reloads.add(task)
    task.add_done_callback(_reloads.discard)


async def serve_ha(
    config: MasterConfig, tokens: TokenTable | None, http: str | None = None, metrics: str | None = None
) -> None:
    """PostgreSQL: stand by until this master holds the lease, lead, step down (docs/ha.md)."""
    ha = HaMaster(config, tokens=tokens, http_listen=http, metrics_listen=metrics)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload(ha.master))
    runner = asyncio.create_task(ha.run(stop), name="horus-ha")
    ready = asyncio.ensure_future(ha.ready.wait())
    await asyncio.wait([runner, ready], return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if ha.ready.is_set():
        host = config.listen.rsplit(":", 1)[0]
        print(f"horus-master listening on {host}:{ha.port}", flush=True)
        log.info("PostgreSQL with standbys: lease %g s, this master is %s", config.leader_lease_s, ha.holder)
    gctune.tune()
    await runner
    log.info("stopped")


async def serve(
    config: MasterConfig, tokens: TokenTable | None, http: str | None = None, metrics: str | None = None
) -> None:
    for listen in (config.listen, http, metrics):
        if listen is not None:
            check_free(listen)  # (before the database is opened: a taken port changes nothing)
    if config.db_url:
        return await serve_ha(config, tokens, http, metrics)
    master = Master(config, tokens=tokens, http_listen=http, metrics_listen=metrics)
    await master.start()
    gctune.tune()  # (the process's settings, not the Master's: in-process tests keep theirs)
    open_plane = config.join_token is None and config.tls_client_ca is None
    log.log(
        logging.WARNING if open_plane else logging.INFO,
        "worker plane credential: %s; lease %g s, kill grace %g s, node timeout %g s",
        config.worker_credential(),
        config.lease_s,
        config.kill_grace,
        config.node_timeout_s,
    )
    host = config.listen.rsplit(":", 1)[0]
    print(f"horus-master listening on {host}:{master.port}", flush=True)
    for what, listen, port, path in (
        ("dashboard", http, master.http.http_port, "/"),
        ("metrics", metrics, master.http.metrics_port, "/metrics"),
    ):
        if listen is not None:
            print(f"horus-master {what} on http://{listen.rpartition(':')[0]}:{port}{path}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload(master))
    await stop.wait()
    log.info("stopping")
    await master.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        tokens = TokenTable.load(args.auth_tokens) if args.auth_tokens is not None else None
    except (OSError, ValueError) as exc:
        print(f"horus-master: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config_from(args), tokens, args.http_listen, args.metrics_listen))
    except OSError as exc:
        print(f"horus-master: {exc}", file=sys.stderr)
        return 1
    except sqlite3.DatabaseError as exc:  # (a file with SQLite's header but damaged past it)
        print(f"horus-master: --db {args.db}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
