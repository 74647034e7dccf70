"""A highly available cluster on 127.0.0.1 for the failover suite: a private PostgreSQL (its own
folder and port, so it can be restarted), three masters on it (each reaching it through a fault
proxy, so one can be cut off), two workers with simulated GPUs and ``--master a,b,c``, and
submitters that record every acknowledged job.

Each job's command appends a ``start``/``end`` line (job, attempt, time) to one file, so the
checks see what really ran on the workers, not only what the masters recorded.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from horus_core.client import SyncHorusClient
from horus_core.errors import HorusError
from horus_core.model import JobSpec
from tests.e2e.cluster import BIN, close_pipes, free_port, stop_processes
from tests.faults.proxy import FaultProxy, Mode
from tests.pgtest import REQUIRE_ENV

ROOT = pathlib.Path(__file__).resolve().parents[2]
PG_SCRIPT = ROOT / "scripts" / "pg-dev.sh"
JOB_S = 1.5
# Worker plane timings: the workers' lease (20 s) outlasts a failover, so their attempts run on.
TIMEOUTS = ("--tick-s", "0.2", "--heartbeat-s", "1", "--lease-s", "20", "--node-timeout-s", "30")


def postgres_bin() -> pathlib.Path | None:
    found = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


def require_postgres() -> pathlib.Path:
    where = postgres_bin()
    if where is None:
        why = "PostgreSQL's server binaries are not installed (bash scripts/pg-dev.sh installs them)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"${REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    return where


class PrivatePostgres:
    """A throw-away cluster of this test's own (scripts/pg-dev.sh with a folder and port)."""

    def __init__(self) -> None:
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="horus-pg-"))
        self.dir.chmod(0o755)  # (the server runs as the postgres user when we are root)
        self.port = free_port()
        self.env = {**os.environ, "HORUS_PG_DIR": str(self.dir / "data"), "HORUS_PG_PORT": str(self.port)}
        self.url = ""

    def start(self) -> str:
        out = subprocess.run(
            ["bash", str(PG_SCRIPT)], env=self.env, capture_output=True, text=True, timeout=120
        )
        if out.returncode != 0:
            raise AssertionError(f"pg-dev.sh failed: {out.stderr}")
        self.url = out.stdout.strip()
        return self.url

    def stop(self) -> None:
        subprocess.run(["bash", str(PG_SCRIPT), "stop"], env=self.env, capture_output=True, timeout=60)

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def job_command(record: pathlib.Path) -> tuple[str, ...]:
    line = '"$1 $HORUS_JOB_ID $HORUS_ATTEMPT $(date +%s.%N)"'
    script = (
        f"rec() {{ echo {line} >> {record}; }}; rec start;"
        f" trap 'rec killed; exit 143' TERM; sleep {JOB_S} & wait $!; rec end"
    )
    return ("sh", "-c", script, "job")


@dataclass
class Submitted:
    ids: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class HaCluster:
    def __init__(self, tmp: pathlib.Path, lease_s: float = 10.0, masters: int = 3, workers: int = 2) -> None:
        self.tmp = tmp
        self.lease_s = lease_s
        self.pg = PrivatePostgres()
        self.ports = [free_port() for _ in range(masters)]
        self.addrs = [f"127.0.0.1:{p}" for p in self.ports]
        self.proxies: list[FaultProxy] = []
        self.masters: list[subprocess.Popen[str] | None] = [None] * masters
        self.workers: list[subprocess.Popen[str]] = []
        self.n_workers = workers
        self.record = tmp / "runs.txt"
        self.record.touch()
        self.submitted = Submitted()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def master_list(self) -> str:
        return ",".join(self.addrs)

    def start(self) -> None:
        url = self.pg.start()
        for _ in self.addrs:
            self.proxies.append(FaultProxy(self.pg.port).start())
        self._url = url
        for i in range(len(self.addrs)):
            self.start_master(i)
            time.sleep(0.3)  # (the first to start leads: easier to read)
        for w in range(self.n_workers):
            name = f"w{w}"
            with open(self.tmp / f"{name}.log", "a") as log:
                self.workers.append(
                    subprocess.Popen(
                        [
                            str(BIN / "horus-worker"),
                            "--master",
                            self.master_list,
                            "--name",
                            name,
                            "--fake-gpus",
                            "2",
                            "--state-dir",
                            str(self.tmp / name),
                            "--grace-s",
                            "2",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        text=True,
                    )
                )

    def db_url(self, i: int) -> str:
        """Master ``i``'s way to the database: through its own proxy."""
        return self._url.replace(f":{self.pg.port}/", f":{self.proxies[i].port}/")

    def start_master(self, i: int) -> None:
        with open(self.tmp / f"master{i}.log", "a") as log:
            proc = subprocess.Popen(
                [
                    str(BIN / "horus-master"),
                    "--listen",
                    self.addrs[i],
                    "--db",
                    self.db_url(i),
                    "--data-dir",
                    str(self.tmp / f"m{i}"),
                    "--policy",
                    "fifo",
                    "--leader-lease-s",
                    f"{self.lease_s:g}",
                    *TIMEOUTS,
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on" in line, line + self.logs()
        self.masters[i] = proc

    def client(self) -> SyncHorusClient:
        return SyncHorusClient(self.master_list, timeout=5)

    # ------------------------------------------------------------------ submitters

    def start_submitters(self, count: int = 2, every_s: float = 0.4) -> None:
        for k in range(count):
            t = threading.Thread(target=self._submit_loop, args=(k, every_s), daemon=True)
            t.start()
            self._threads.append(t)

    def stop_submitters(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        self._threads.clear()
        self._stop.clear()

    def _submit_loop(self, k: int, every_s: float) -> None:
        spec = JobSpec(command=job_command(self.record), gpus=1, owner="")
        with self.client() as c:
            while not self._stop.is_set():
                rid = f"s{k}-{uuid.uuid4().hex[:10]}"
                try:
                    job = c.submit(spec, request_id=rid)
                    with self.submitted.lock:
                        self.submitted.ids.add(job.id)
                except HorusError as exc:  # not acknowledged: not owed (the retry budget ran out)
                    with self.submitted.lock:
                        self.submitted.failures.append(f"{rid}: {exc}")
                self._stop.wait(every_s)

    # ------------------------------------------------------------------ the leader

    def leader(self, within_s: float = 60.0) -> int:
        """The index of the master that leads now (from ``hctl masters``' probe)."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            with contextlib.suppress(HorusError), self.client() as c:
                for where, role, _ in c.probe_masters():
                    if role == "leader" and where in self.addrs:
                        return self.addrs.index(where)
            time.sleep(0.2)
        raise AssertionError("no leader\n" + self.logs())

    def kill(self, i: int, sig: int = signal.SIGKILL) -> float:
        proc = self.masters[i]
        assert proc is not None
        at = time.time()
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=10)
            close_pipes(proc)
            self.masters[i] = None
        return at

    def cut(self, i: int) -> None:
        self.proxies[i].set_mode(Mode.DROP_BOTH)

    def heal(self, i: int) -> None:
        self.proxies[i].heal()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        self.stop_submitters()
        procs = [p for p in [*self.workers, *self.masters] if p is not None]
        for p in procs:  # (a master stopped by a fault test must run to hear SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGCONT)
        stop_processes(procs)
        for proxy in self.proxies:
            proxy.stop()
        self.pg.remove()


@contextlib.contextmanager
def ha_cluster(tmp: pathlib.Path, lease_s: float = 10.0) -> Iterator[HaCluster]:
    require_postgres()
    cluster = HaCluster(tmp, lease_s)
    try:
        cluster.start()
        yield cluster
    except BaseException:
        sys.stderr.write(cluster.logs())
        raise
    finally:
        cluster.stop()
