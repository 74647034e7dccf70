"""The lease watchdog (worker/lease.py) against real containers of the DockerRuntime: it stops them
once the lease has passed, with no worker daemon involved (``scripts/docker-test-setup.sh``)."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import aiodocker
import pytest

from horus_core.model import JobSpec
from tests.docker_engine import IMAGE, require_engine
from tests.e2e.cluster import LocalCluster
from worker.lease import Watchdog, WatchdogProcess, write_lease
from worker.runtime import containers
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.containers import ContainerRecords
from worker.runtime.docker import DockerAttempt, DockerRuntime

pytestmark = pytest.mark.docker
TRAPS_TERM = "trap 'exit 143' TERM; echo ready; while true; do sleep 0.1; done"
IGNORES_TERM = "trap '' TERM; echo ready; while true; do sleep 0.1; done"
LEASE_S, KILL_GRACE_S = 1.5, 0.5
TIMEOUTS = (  # the fault suite's short leases; kill grace derived: min(5, 3 - 1.5 - 1) = 0.5 s
    *("--tick-s", "0.1", "--heartbeat-s", "0.2", "--lease-s", str(LEASE_S), "--node-timeout-s", "3"),
)


@pytest.fixture(scope="module", autouse=True)
def _engine() -> Iterator[None]:
    require_engine()
    yield


@pytest.fixture
async def runtime() -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(f"test-{uuid.uuid4().hex[:10]}", orphan_grace_s=0)
    yield rt
    await rt.remove_orphans(set())
    await rt.close()


async def _start(rt: DockerRuntime, tmp: pathlib.Path, script: str) -> DockerAttempt:
    """A running container, recorded where the watchdog reads it (as the worker agent does)."""
    key = AttemptKey("job-1", 1)
    log_path = tmp / "logs" / "job-1.log"
    spec = JobSpec(command=("sh", "-c", script), image=IMAGE)
    attempt = await rt.start(LaunchRequest(key, spec, (), log_path, ()))
    ContainerRecords(tmp / "containers").save(key, attempt.container_id, attempt.engine)
    for _ in range(200):  # its trap is set once it says so (up to 10 s)
        if log_path.exists() and "ready" in log_path.read_text():
            return attempt
        await asyncio.sleep(0.05)
    raise AssertionError("the container never became ready")


async def _running(container_id: str) -> bool:
    async with aiodocker.Docker() as docker:
        info = await docker.containers.get(container_id)
        return bool(info["State"]["Running"])


async def test_a_container_runs_while_the_lease_holds_and_gets_sigterm_after_it(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    attempt = await _start(runtime, tmp_path, TRAPS_TERM)
    dog, now = Watchdog(tmp_path), time.monotonic()
    write_lease(tmp_path, now + 30, 5.0)
    assert await asyncio.to_thread(dog.check, now + 29) == []
    assert await _running(attempt.container_id)
    assert await asyncio.to_thread(dog.check, now + 31) == [(attempt.container_id, signal.SIGTERM)]
    status = await asyncio.wait_for(attempt.wait(), 20)
    assert status.exit_code == 143  # its own TERM trap ran: a SIGTERM, not a kill


async def test_a_container_ignoring_sigterm_is_killed_after_the_grace(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    attempt = await _start(runtime, tmp_path, IGNORES_TERM)
    dog, now = Watchdog(tmp_path), time.monotonic()
    write_lease(tmp_path, now - 0.1, 2.0)
    assert await asyncio.to_thread(dog.check, now) == [(attempt.container_id, signal.SIGTERM)]
    assert await asyncio.to_thread(dog.check, now + 1.0) == []  # within the grace
    assert await _running(attempt.container_id)
    assert await asyncio.to_thread(dog.check, now + 2.0) == [(attempt.container_id, signal.SIGKILL)]
    status = await asyncio.wait_for(attempt.wait(), 20)
    assert status.exit_code == 137
    assert await asyncio.to_thread(dog.check, now + 3.0) == []  # done with it: no more docker calls


async def test_a_gone_container_is_reported_and_skipped(tmp_path: pathlib.Path) -> None:
    ContainerRecords(tmp_path / "containers").save(AttemptKey("j", 1), f"horus-gone-{uuid.uuid4().hex}")
    dog, now = Watchdog(tmp_path), time.monotonic()
    write_lease(tmp_path, now - 0.1, 1.0)
    assert await asyncio.to_thread(dog.check, now) == []
    assert len(dog.errors) == 1 and "horus-gone" in dog.errors[0]
    assert await asyncio.to_thread(dog.check, now + 1.0) == []  # its SIGKILL try fails too
    assert await asyncio.to_thread(dog.check, now + 2.0) == [] and dog.errors == []  # then left alone


def test_an_engine_that_does_not_answer_times_out_without_stopping_the_watchdog(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two containers recorded on an engine socket that accepts and never answers: both calls run
    at once, time out, and are reported; the watchdog carries on."""
    monkeypatch.setattr(containers, "KILL_TIMEOUT_S", 0.5)
    with socket.socket(socket.AF_UNIX) as mute:
        mute.bind(str(tmp_path / "mute.sock"))
        mute.listen(8)
        records = ContainerRecords(tmp_path / "containers")
        for attempt in (1, 2):
            records.save(AttemptKey("j", attempt), f"c{attempt}" * 6, f"unix://{tmp_path}/mute.sock")
        dog, now = Watchdog(tmp_path), time.monotonic()
        write_lease(tmp_path, now - 0.1, 1.0)
        assert dog.check(now) == []
        assert sorted(dog.errors) == [
            "docker kill c1c1c1c1c1c1: the engine did not answer within 0.5 s",
            "docker kill c2c2c2c2c2c2: the engine did not answer within 0.5 s",
        ]


async def test_the_watchdog_process_stops_a_container_on_its_own(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    """The real watchdog subprocess (its parent: this test process, standing in for the daemon)."""
    attempt = await _start(runtime, tmp_path, IGNORES_TERM)
    write_lease(tmp_path, time.monotonic() - 0.1, 0.5)
    dog = await WatchdogProcess.start(tmp_path)
    try:
        status = await asyncio.wait_for(attempt.wait(), 30)
    finally:
        await dog.stop()
    assert status.exit_code == 137  # SIGTERM ignored, SIGKILL after the grace


def _running_containers(worker: str, *, stopped_too: bool = False) -> list[str]:
    argv = [
        "docker",
        "ps",
        *(["-a"] if stopped_too else []),
        "-q",
        "--filter",
        f"label=horus.worker={worker}",
    ]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout.split()


def test_a_frozen_docker_worker_daemon_cannot_keep_its_container_past_the_lease(
    tmp_path: pathlib.Path,
) -> None:
    """Issue 15 #6 for --runtime docker: real master and worker; with the worker daemon SIGSTOPped,
    its watchdog stops the container within lease + kill grace + margin of the freeze."""
    name = f"dw-{uuid.uuid4().hex[:8]}"
    cluster = LocalCluster(tmp_path, timeouts=TIMEOUTS)
    cluster.start_master()
    try:
        cluster.start_worker(name, "1", "--runtime", "docker")
        cluster.wait_nodes(1)
        jid = cluster.hctl("submit", "--gpus", "1", "--image", IMAGE, "--", "sh", "-c", IGNORES_TERM).stdout
        deadline = time.monotonic() + 60
        while not _running_containers(name):
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
        while [j["state"] for j in cluster.hctl_json("jobs")] != ["RUNNING"]:  # the master knows
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
        cluster.workers[name].send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        while _running_containers(name):
            elapsed = time.monotonic() - frozen_at
            assert elapsed < LEASE_S + KILL_GRACE_S + 3.0, "the container outlived its lease"
            time.sleep(0.05)
        stopped_s = time.monotonic() - frozen_at
        assert stopped_s > 0.5  # the lease ended it, not the freeze itself
        print(
            json.dumps(
                {"frozen_to_stopped_s": round(stopped_s, 2), "lease_s": LEASE_S, "grace_s": KILL_GRACE_S}
            )
        )
        cluster.hctl("cancel", jid.strip())  # so that no new attempt starts once it resumes
        cluster.workers[name].send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 30
        while _running_containers(name, stopped_too=True):  # the resumed daemon removes it
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.1)
    finally:
        if name in cluster.workers:
            cluster.workers[name].send_signal(signal.SIGCONT)
        cluster.stop()
        left = _running_containers(name, stopped_too=True)
        if left:
            subprocess.run(["docker", "rm", "-f", *left], capture_output=True, check=False)
    assert "Traceback" not in (tmp_path / f"{name}.log").read_text()
