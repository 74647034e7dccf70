"""Master settings (filled from the command line by :mod:`master.main`, or directly by tests).

The timeouts must satisfy ``node_timeout_s >= lease_s + kill_grace_s + LEASE_MARGIN_S`` (and
``heartbeat_s < lease_s``): a worker that stops hearing renewals stops its attempts within
``lease_s + kill_grace_s`` of its last acknowledged heartbeat, and the master re-queues them only
``node_timeout_s`` after it last heard the worker (docs/reliability.md). Bad pairs are refused.
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass, field

from horus_core.policies import OBJECTIVES

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
LEASE_MARGIN_S = 1.0  # the worker's lease checks, signal delivery and process exit fit in this
DEFAULT_KILL_GRACE_S = 5.0
MIN_KILL_GRACE_S = 0.1
OPEN_WORKER_PLANE = (
    "client auth (--auth-tokens) is on but the worker plane has no credential: anyone could register "
    "as a node and receive users' jobs; give --join-token or --tls-client-ca (mutual TLS)"
)


@dataclass(frozen=True)
class MasterConfig:
    db_path: pathlib.Path
    listen: str = "127.0.0.1:50051"
    # A PostgreSQL database (postgresql://user@host:port/db) instead of the SQLite file db_path;
    # db_path then only places the data dir's default (docs/ha.md).
    db_url: str = ""
    # With PostgreSQL: the leader's lease (docs/ha.md); a standby takes over within about this long.
    leader_lease_s: float = 10.0
    # Where clients and workers reach this master, as the lease row tells them ("": the listen address).
    advertise: str = ""
    policy: str = "fifo"
    data_dir: pathlib.Path | None = None  # logs go to <data_dir>/logs; default: beside the db
    tick_s: float = 1.0
    node_timeout_s: float = 30.0
    lease_s: float = 20.0
    heartbeat_s: float = 2.0
    # SIGTERM -> SIGKILL grace of an attempt stopped because its lease expired; None: the default
    # (5 s), or less where the node timeout leaves less room.
    kill_grace_s: float | None = None
    join_token: str | None = None
    auth_tokens: pathlib.Path | None = None
    group_commit: bool = True
    max_batch: int = 1024
    commit_delay_s: float = 0.001  # group commit: wait this long for company when writers overlap
    max_concurrent_rpcs: int = 4096  # worker streams and watchers count too (docs/reliability.md)
    max_watchers: int = 256
    watch_queue: int = 1000
    session_queue: int = 4096
    shutdown_grace_s: float = 2.0
    max_log_bytes: int = 1 << 30  # per attempt; more is dropped
    tls_cert: pathlib.Path | None = None  # server certificate (PEM): serve TLS instead of plaintext
    tls_key: pathlib.Path | None = None
    tls_client_ca: pathlib.Path | None = None  # mutual TLS: clients and workers need a cert from this CA
    allow_mounts: tuple[str, ...] = ()  # host path prefixes a job spec may mount (checked at submit)
    extra_server_options: tuple[tuple[str, int], ...] = field(default_factory=tuple)
    # Speed floor (issue 10) of a job submitted without one (min_speed 0), filled in at
    # submission; also what the floor enforcement checks measured speeds against. 0: none.
    min_speed: float = 0.0
    # The optimus policy's re-plan interval (issue 12); None: its own default (600 s).
    optimus_replan_s: float | None = None
    # Queues and quotas (issue 13, docs/queues.md): the TOML file (None: one queue for all) and
    # the least time an attempt runs before it may be preempted.
    queues: pathlib.Path | None = None
    min_run_s: float = 0.0
    # Round length of the Gavel policies (issue 10); None: HORUS_GAVEL_ROUND_S, else 360 s.
    round_s: float | None = None
    # What the horus policy serves (issue 33): "jct" (each job's completion) or "makespan" (the
    # whole queue's); other policies ignore it.
    objective: str = "jct"
    # Ports a multi-node gang's rendezvous (MASTER_PORT) is chosen from, one per live gang.
    gang_ports: tuple[int, int] = (29500, 29999)
    # A measured pair table in Gavel's format instead of the packaged one (issue 30); None: packaged.
    throughputs: pathlib.Path | None = None

    def __post_init__(self) -> None:
        problem = timeout_problem(
            self.tick_s, self.heartbeat_s, self.lease_s, self.node_timeout_s, self.kill_grace_s
        )
        if problem is not None:
            raise ValueError(problem)
        if self.auth_tokens is not None and self.join_token is None and self.tls_client_ca is None:
            raise ValueError(OPEN_WORKER_PLANE)
        if not (math.isfinite(self.min_speed) and 0.0 <= self.min_speed <= 1.0):
            raise ValueError(f"min_speed must be within [0, 1], got {self.min_speed}")
        replan = self.optimus_replan_s
        if replan is not None and not (math.isfinite(replan) and replan >= 0):
            raise ValueError(f"optimus_replan_s must be a finite number >= 0, got {replan}")
        if not (math.isfinite(self.min_run_s) and self.min_run_s >= 0.0):
            raise ValueError(f"min_run_s must be a number of seconds >= 0, got {self.min_run_s}")
        if self.round_s is not None and not (math.isfinite(self.round_s) and self.round_s > 0):
            raise ValueError(f"round_s must be a positive number of seconds, got {self.round_s}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if not (math.isfinite(self.leader_lease_s) and self.leader_lease_s >= 1.0):
            raise ValueError(f"leader_lease_s must be at least 1 s, got {self.leader_lease_s}")
        problem = leader_lease_problem(
            self.db_url, self.leader_lease_s, self.heartbeat_s, self.node_timeout_s
        )
        if problem is not None:
            raise ValueError(problem)
        lo, hi = self.gang_ports
        if not 0 < lo <= hi < 65536:
            raise ValueError(f"gang_ports must be a range within 1-65535, got {lo}-{hi}")

    @property
    def kill_grace(self) -> float:
        """The lease-expiry kill grace in force (explicit, or derived from the node timeout)."""
        if self.kill_grace_s is not None:
            return self.kill_grace_s
        return min(DEFAULT_KILL_GRACE_S, self.node_timeout_s - self.lease_s - LEASE_MARGIN_S)

    @property
    def ack_timeout_s(self) -> float:
        """An assignment not acknowledged for this long is taken back: by then a worker that got it
        late holds a lease at most ``2 * lease_s`` past the assignment (docs/reliability.md)."""
        return 2 * self.lease_s + self.kill_grace + LEASE_MARGIN_S

    def worker_credential(self) -> str:
        """Which credential the worker plane asks for, in words (logged at start)."""
        if self.tls_client_ca is not None:
            return "mutual TLS client certificates" + (" and a join token" if self.join_token else "")
        return "a join token" if self.join_token else "none (the worker plane is open)"

    @property
    def db(self) -> pathlib.Path | str:
        """What the store opens: the PostgreSQL URL, or the SQLite file."""
        return self.db_url or self.db_path

    @property
    def logs_dir(self) -> pathlib.Path:
        base = self.data_dir if self.data_dir is not None else self.db_path.parent
        return base / "logs"


def timeout_problem(
    tick_s: float, heartbeat_s: float, lease_s: float, node_timeout_s: float, kill_grace_s: float | None
) -> str | None:
    """Why these timeouts are unsafe, or None (the rule is in the module docstring)."""
    named = {
        "tick_s": tick_s,
        "heartbeat_s": heartbeat_s,
        "lease_s": lease_s,
        "node_timeout_s": node_timeout_s,
    }
    if kill_grace_s is not None:
        named["kill_grace_s"] = kill_grace_s
    for name, value in named.items():
        if not math.isfinite(value) or value <= 0:
            return f"{_flag(name)} must be a positive number, got {value}"
    if heartbeat_s >= lease_s:
        return (
            f"{_flag('heartbeat_s')} ({heartbeat_s:g}) must be shorter than {_flag('lease_s')} ({lease_s:g})"
        )
    grace = kill_grace_s if kill_grace_s is not None else MIN_KILL_GRACE_S
    grace_name = _flag("kill_grace_s") if kill_grace_s is not None else "the least kill grace"
    need = lease_s + grace + LEASE_MARGIN_S
    if node_timeout_s < need:
        return (
            f"unsafe timeouts: {_flag('node_timeout_s')} {node_timeout_s:g} must be at least "
            f"{_flag('lease_s')} ({lease_s:g}) + {grace_name} ({grace:g}) + margin "
            f"({LEASE_MARGIN_S:g}) = {need:g} s, or a worker cut off from the master could still run "
            "an attempt the master has re-queued"
        )
    return None


def leader_lease_problem(
    db_url: str, lease_s: float, heartbeat_s: float, node_timeout_s: float
) -> str | None:
    """With standbys (PostgreSQL), a new leader must hear a node before its timeout: the workers
    move over once the old leader is gone, within about a lease of its last renewal."""
    need = lease_s + 2 * heartbeat_s
    if db_url and node_timeout_s < need:
        return (
            f"--node-timeout-s {node_timeout_s:g} must be at least --leader-lease-s ({lease_s:g}) + two "
            f"heartbeats ({2 * heartbeat_s:g}) = {need:g} s, or a new leader could declare nodes lost "
            "that are still moving over from the old one (docs/ha.md)"
        )
    return None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
