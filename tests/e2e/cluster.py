"""A real local cluster for end-to-end tests: master and workers as processes on 127.0.0.1."""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

BIN = pathlib.Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DEFAULT_TIMEOUTS = ("--tick-s", "0.2", "--heartbeat-s", "0.5", "--lease-s", "8", "--node-timeout-s", "12")


class LocalCluster:
    def __init__(
        self,
        tmp: pathlib.Path,
        policy: str = "fifo",
        port: int | None = None,
        timeouts: Sequence[str] = DEFAULT_TIMEOUTS,
    ) -> None:
        """``timeouts``: the master's timing flags (the fault suite uses short leases)."""
        self.tmp = tmp
        self.timeouts = tuple(timeouts)
        self.policy = policy
        self.port = port or free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.master: subprocess.Popen[str] | None = None
        self.workers: dict[str, subprocess.Popen[str]] = {}

    def start_master(self, *extra: str) -> None:
        flags = list(self.timeouts)
        args = [str(BIN / "horus-master"), "--listen", self.addr, "--db", str(self.tmp / "horus.db")]
        with open(self.tmp / "master.log", "a") as log:
            self.master = subprocess.Popen(
                [*args, "--policy", self.policy, *flags, *extra],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.master.stdout is not None
        line = self.master.stdout.readline()
        assert re.search(r"listening on 127\.0\.0\.1:\d+", line), line + (self.tmp / "master.log").read_text()

    def start_worker(self, name: str, gpus: str = "4", *extra: str, master: str | None = None) -> None:
        """``extra``: more worker flags, e.g. ``--sim-interference FILE``; ``master``: dial this
        address instead of the master's (a fault proxy)."""
        addr = master or self.addr
        args = [str(BIN / "horus-worker"), "--master", addr, "--name", name, "--fake-gpus", gpus, *extra]
        with open(self.tmp / f"{name}.log", "a") as log:
            self.workers[name] = subprocess.Popen(
                [*args, "--state-dir", str(self.tmp / name), "--grace-s", "2"],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def kill_master(self) -> None:
        assert self.master is not None
        self.master.kill()
        self.master.wait(timeout=10)
        close_pipes(self.master)

    def hctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(BIN / "hctl"), "--master", self.addr, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"hctl {args} exited {result.returncode}: {result.stderr}")
        return result

    def job_logs_with(self, job_id: str, needle: str, timeout: float = 20.0) -> str:
        """``hctl logs JOB``'s text once it holds ``needle``, or as it is after ``timeout`` s: a
        part's last lines can reach the master's log store just after the job has ended."""
        deadline = time.monotonic() + timeout
        text = self.hctl("logs", job_id).stdout
        while needle not in text and time.monotonic() < deadline:
            time.sleep(0.5)
            text = self.hctl("logs", job_id).stdout
        return text

    def hctl_json(self, *args: str) -> Any:
        return json.loads(self.hctl(*args, "-o", "json").stdout)

    def wait_nodes(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        nodes: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            nodes = [n for n in self.hctl_json("nodes") if n["state"] == "READY"]
            if len(nodes) >= count:
                return nodes
            time.sleep(0.2)
        raise AssertionError(f"only {len(nodes)} READY nodes after {timeout} s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.tmp.glob("*.log"))

    def stop(self) -> None:
        stop_processes([*self.workers.values(), *([self.master] if self.master else [])])


def stop_processes(procs: list[subprocess.Popen[str]]) -> None:
    """SIGTERM every one still running, then wait for each (SIGKILL after 20 s) and close its pipes."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
        close_pipes(p)


def close_pipes(p: subprocess.Popen[str]) -> None:
    """Close what the test read of a process (its stdout pipe), so no file is left to the GC."""
    if p.stdout is not None:
        p.stdout.close()


def workload_cmd(seconds: float, steps: int = 20, extra: Sequence[str] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "horus_core.workload",
        "--steps",
        str(steps),
        "--steps-per-s",
        f"{steps / seconds:.3f}",
        *extra,
    ]


def env_without_master() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "HORUS_MASTER"}


def until(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll ``check`` every 0.2 s until it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")
