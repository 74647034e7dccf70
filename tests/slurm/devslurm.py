"""A real one-node Slurm for the pilots' tests, started by scripts/slurm-dev.sh.

Without Slurm (or not as root) the tests skip with the reason, unless $HORUS_REQUIRE_SLURM is set
(CI), where they fail: there the cluster must start."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

import pytest

from tests.e2e.cluster import free_port

REQUIRE_ENV = "HORUS_REQUIRE_SLURM"
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def unavailable(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"${REQUIRE_ENV} is set but {why}")
    pytest.skip(why)


class DevSlurm:
    """slurmctld + slurmd + munge under ``root``; ``env`` is what a Slurm client needs."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}:/usr/sbin")
        self.env["HORUS_SLURM_PORT"] = str(_port_pair())

    def start(self) -> None:
        if (
            shutil.which("slurmctld", path=self.env["PATH"]) is None
            or shutil.which("munged", path=self.env["PATH"]) is None
        ):
            unavailable("Slurm is not installed (apt-get install slurm-wlm munge)")
        if os.geteuid() != 0:
            unavailable("slurmd must run as root")
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "slurm-dev.sh"), str(self.root)],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=90,
        )
        if done.returncode != 0:
            unavailable(f"the test Slurm did not start: {done.stderr.strip()[-2000:]}")
        self.env["SLURM_CONF"] = done.stdout.strip()

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "slurm-dev.sh"), "stop", str(self.root)], env=self.env, timeout=60
        )

    def run(
        self, *argv: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, capture_output=True, text=True, env=env or self.env, timeout=60)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} exited {done.returncode}: {done.stdout}{done.stderr}")
        return done

    def horus_slurm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(str(BIN / "horus-slurm"), *args, check=check)

    def active(self) -> list[str]:
        """The Slurm job ids of the pilots still pending or running."""
        out = self.run("squeue", "-h", "-n", "horus-pilot", "-t", "PD,R,CG", "-o", "%i").stdout
        return out.split()

    def wait_gone(self, job_ids: Sequence[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while set(job_ids) & set(self.active()):
            if time.monotonic() > deadline:
                raise AssertionError(f"pilots {job_ids} still active after {timeout} s")
            time.sleep(0.3)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.root.glob("pilot-*.out"))
        )


def _port_pair() -> int:
    """A free port whose successor is free too (slurmctld's and slurmd's)."""
    for _ in range(50):
        port = free_port()
        if port < 65535:
            try:
                import socket

                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port pair")
