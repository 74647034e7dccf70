"""The lease watchdog: a separate process that stops the attempts when the worker's lease runs out.

The worker daemon writes its lease deadline (``CLOCK_MONOTONIC`` seconds, the same clock in every
process of the host) to ``<state-dir>/lease.json`` whenever the master renews it. The watchdog,
started by the daemon in a session of its own, reads that file ten times a second; once the
deadline has passed it sends SIGTERM to every process group recorded under
``<state-dir>/pgroups`` (the ProcessRuntime's records) and to the main process of every container
recorded under ``<state-dir>/containers`` (the DockerRuntime's attempts, with ``docker kill``), then
SIGKILL ``grace`` seconds later. It needs nothing from the daemon's event loop, so a frozen daemon
(SIGSTOP, a stuck loop) cannot keep an attempt running past its lease. It exits when its parent
(the daemon) is gone: process attempts die with the daemon then (parent-death signal); containers
are re-attached or removed by the next life of the worker.

    python -m worker.lease STATE_DIR PARENT_PID
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import sys
import time

from worker.runtime.containers import ContainerRecords, docker_kill
from worker.runtime.pgroups import GroupRecords, kill_group

POLL_S = 0.1
LEASE_FILE = "lease.json"


def write_lease(state_dir: pathlib.Path, deadline: float, grace_s: float) -> None:
    """Atomically record the lease deadline (monotonic seconds) and the kill grace."""
    path = state_dir / LEASE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"deadline": deadline, "grace": grace_s}))
    os.replace(tmp, path)


def read_lease(state_dir: pathlib.Path) -> tuple[float, float] | None:
    try:
        raw = json.loads((state_dir / LEASE_FILE).read_text())
        return float(raw["deadline"]), float(raw["grace"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Watchdog:
    """One check of the lease at a time (:meth:`check`); pure apart from the signals it sends."""

    def __init__(self, state_dir: pathlib.Path) -> None:
        self.state_dir = state_dir
        self.records = GroupRecords(state_dir / "pgroups")
        self.containers = ContainerRecords(state_dir / "containers")
        self._termed: dict[tuple[int, int], float] = {}  # (pgid, start time) -> when SIGTERM went
        self._c_termed: dict[str, float] = {}  # container id -> when SIGTERM went
        self._c_done: set[str] = set()  # containers SIGKILLed (or tried): left alone
        self.errors: list[str] = []  # `docker kill` failures of the last check, for the log

    def check(self, now: float) -> list[tuple[int | str, signal.Signals]]:
        """Signal what must stop at ``now``; returns the signals sent (to a pgid or a container id)."""
        lease = read_lease(self.state_dir)
        self.errors = []
        if lease is None or now <= lease[0]:
            self._termed.clear()
            self._c_termed.clear()
            self._c_done.clear()
            return []
        return [*self._check_groups(now, lease[1]), *self._check_containers(now, lease[1])]

    def _check_groups(self, now: float, grace: float) -> list[tuple[int | str, signal.Signals]]:
        sent: list[tuple[int | str, signal.Signals]] = []
        for _, record in self.records.load():
            if record is None or not record.alive():
                continue
            first = self._termed.setdefault((record.pgid, record.start_time), now)
            sig = _due(first, now, grace)
            if sig is not None and kill_group(record.pgid, sig):
                sent.append((record.pgid, sig))
        return sent

    def _check_containers(self, now: float, grace: float) -> list[tuple[int | str, signal.Signals]]:
        orders = []
        for record in self.containers.load():
            cid = record.container_id
            sig = None if cid in self._c_done else _due(self._c_termed.setdefault(cid, now), now, grace)
            if sig is not None:
                orders.append((record, sig))
                if sig is signal.SIGKILL:  # a failed SIGTERM (no engine?) still got its SIGKILL try
                    self._c_done.add(cid)
        sent: list[tuple[int | str, signal.Signals]] = []
        for (record, sig), (ok, error) in zip(orders, docker_kill(orders), strict=True):
            if ok:
                sent.append((record.container_id, sig))
            else:
                self.errors.append(f"docker kill {record.container_id[:12]}: {error}")
        return sent


def _due(first: float, now: float, grace: float) -> signal.Signals | None:
    """The signal an attempt first signalled at ``first`` is due at ``now``, if any."""
    if first == now:
        return signal.SIGTERM
    return signal.SIGKILL if now - first >= grace else None


def main(argv: list[str]) -> int:
    state_dir, parent = pathlib.Path(argv[0]), int(argv[1])
    dog = Watchdog(state_dir)
    while os.getppid() == parent:
        for target, sig in dog.check(time.monotonic()):
            what = f"group {target}" if isinstance(target, int) else f"container {target[:12]}"
            print(f"horus lease watchdog: lease expired, {sig.name} to {what}", file=sys.stderr, flush=True)
        for error in dog.errors:
            print(f"horus lease watchdog: {error}", file=sys.stderr, flush=True)
        time.sleep(POLL_S)
    return 0


class WatchdogProcess:
    """The daemon's handle on its watchdog (started in its own session, so a stop of the daemon's
    process group does not stop it too)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, state_dir: pathlib.Path) -> WatchdogProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "worker.lease",
            str(state_dir),
            str(os.getpid()),
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(proc)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            await self.proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
