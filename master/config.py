"""Master settings (filled from the command line by :mod:`master.main`, or directly by tests)."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

MAX_MESSAGE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class MasterConfig:
    db_path: pathlib.Path
    listen: str = "127.0.0.1:50051"
    policy: str = "fifo"
    data_dir: pathlib.Path | None = None  # logs go to <data_dir>/logs; default: beside the db
    tick_s: float = 1.0
    node_timeout_s: float = 30.0
    lease_s: float = 20.0
    heartbeat_s: float = 2.0
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
    extra_server_options: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    @property
    def logs_dir(self) -> pathlib.Path:
        base = self.data_dir if self.data_dir is not None else self.db_path.parent
        return base / "logs"
