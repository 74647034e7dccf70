"""Container jobs end to end: a real master, a real worker with --runtime docker, a real engine.

Skipped when no Docker engine answers (scripts/docker-test-setup.sh starts one); with
HORUS_REQUIRE_DOCKER=1 (CI, after that script) a missing engine is a failure instead.
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from horus_core import SyncHorusClient
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec, JobState
from tests.docker_engine import IMAGE, require_engine
from tests.e2e.cluster import BIN, LocalCluster

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]


@pytest.fixture
def docker_cluster(tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    require_engine()
    c = LocalCluster(tmp_path)
    try:
        c.start_master("--allow-mount", "/etc")  # the master lets /etc through; the worker does not
        c.start_worker("dock", "2", "--runtime", "docker")
        c.wait_nodes(1)
        yield c
    finally:
        c.stop()


def box(*cmd: str, **kw: object) -> JobSpec:
    return JobSpec(command=cmd, gpus=1, image=IMAGE, **kw)  # type: ignore[arg-type]


def test_container_jobs_logs_exit_codes_cancel_and_refusals(docker_cluster: LocalCluster) -> None:
    with SyncHorusClient.connect(docker_cluster.addr) as client:
        ok = client.submit(box("sh", "-c", "echo hello from a container; echo gpus=$CUDA_VISIBLE_DEVICES"))
        bad = client.submit(box("sh", "-c", "exit 3"))
        mount = client.submit(box("true", mounts=("/etc:/host-etc:ro",)))
        done = client.wait(ok.id, timeout=60)
        assert done.state is JobState.SUCCEEDED, done.reason
        text = b"".join(client.logs(ok.id)).decode()
        assert "hello from a container" in text and f"gpus={done.gpus[0]}" in text
        failed = client.wait(bad.id, timeout=60)
        assert failed.state is JobState.FAILED and failed.exit_code == 3
        refused = client.wait(mount.id, timeout=60)
        assert refused.state is JobState.FAILED and "not allowed" in refused.reason, refused.reason
        with pytest.raises(InvalidArgument, match="not allowed"):  # outside the master's allow-list
            client.submit(box("true", mounts=("/var:/host-var:ro",)))

        sleeper = client.submit(box("sleep", "1000"))
        deadline = time.monotonic() + 60
        while client.get(sleeper.id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the container never started"
            time.sleep(0.2)
        client.cancel(sleeper.id)
        assert client.wait(sleeper.id, timeout=60).state is JobState.CANCELLED


def test_restarted_worker_reattaches_to_its_running_container(docker_cluster: LocalCluster) -> None:
    c = docker_cluster
    with SyncHorusClient.connect(c.addr) as client:
        job = client.submit(box("sh", "-c", "sleep 6; echo survived the worker"))
        deadline = time.monotonic() + 60
        while client.get(job.id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the container never started"
            time.sleep(0.2)
        c.workers["dock"].send_signal(signal.SIGKILL)  # the worker dies; its container does not
        c.workers["dock"].wait(timeout=10)
        with open(c.tmp / "dock-2.log", "w") as log:
            c.workers["dock"] = subprocess.Popen(
                [
                    str(BIN / "horus-worker"),
                    "--master",
                    c.addr,
                    "--name",
                    "dock",
                    "--fake-gpus",
                    "2",
                    "--runtime",
                    "docker",
                    "--state-dir",
                    str(c.tmp / "dock"),
                    "--grace-s",
                    "2",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        done = client.wait(job.id, timeout=90)
        assert done.state is JobState.SUCCEEDED and done.attempt == 1, (done.state, done.attempt, done.reason)
        assert "survived the worker" in b"".join(client.logs(job.id)).decode()
