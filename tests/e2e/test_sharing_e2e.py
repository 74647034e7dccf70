"""Safe sharing through the real processes (docs/sharing.md): a master, one worker with one
simulated V100, two stand-in workloads with GPU memory caps on it.

- ``timeslice``: the job that grows past its cap is stopped by the worker's memory watchdog
  (``GpuMemoryExceeded``) within 2 s of crossing it, its neighbour succeeds, and it runs again
  alone with a raised cap and succeeds.
- ``mps`` (a fake ``nvidia-cuda-mps-control`` on PATH): the second job is the GPU's MPS client,
  held to its pinned memory limit; it fails with CUDA's out-of-memory error, runs again alone and
  succeeds; the daemon started for it is quit once the GPU is idle.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, workload_cmd

pytestmark = pytest.mark.timeout(180)
FAKES = pathlib.Path(__file__).resolve().parents[1] / "fakes"
GROWER = "ResNet-18 (batch size 32)"
NEIGHBOUR = "ResNet-18 (batch size 16)"  # (the pair shares a V100 at full speed in the table)
CAP = 4096


def grower(seconds: float) -> JobSpec:
    cmd = workload_cmd(seconds, steps=100, extra=["--gpu-memory-mib", "3072", "--grow-to-mib", "10240"])
    return JobSpec(tuple(cmd), job_type=GROWER, gpu_memory_mib=CAP, name="grower")


def neighbour(seconds: float) -> JobSpec:
    cmd = workload_cmd(seconds, steps=100, extra=["--gpu-memory-mib", "2048"])
    return JobSpec(tuple(cmd), job_type=NEIGHBOUR, gpu_memory_mib=CAP, name="neighbour")


def until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def attempt_log(client: SyncHorusClient, job_id: str, attempt: int) -> str:
    return b"".join(client.logs(job_id, attempt=attempt)).decode()


def test_over_cap_job_is_stopped_its_neighbour_succeeds_and_it_runs_alone(cluster: LocalCluster) -> None:
    cluster.policy = "horus"
    cluster.start_master()
    cluster.start_worker("w1", "1xV100", "--sharing", "timeslice")
    cluster.wait_nodes(1)
    with SyncHorusClient.connect(cluster.addr) as client:
        b = client.submit(neighbour(14.0))
        a = client.submit(grower(8.0))
        done_b = client.wait(b.id, timeout=120)
        done_a = client.wait(a.id, timeout=120)
        first = attempt_log(client, a.id, 1)
    assert done_b.state is JobState.SUCCEEDED and done_b.attempt == 1, done_b.reason
    assert done_a.state is JobState.SUCCEEDED and done_a.attempt == 2, done_a.reason
    # the first attempt shared the GPU with b; it was stopped within 2 s of going over its cap
    crossed = float(re.search(r"over cap \d+ MiB at ([\d.]+)", first).group(1))  # type: ignore[union-attr]
    stopped = float(re.search(r"received SIGTERM at step \d+ at ([\d.]+)", first).group(1))  # type: ignore[union-attr]
    print(f"stopped {stopped - crossed:.2f} s after crossing its cap")
    assert 0 < stopped - crossed <= 2.0, first
    # it ran again alone (after its neighbour ended) with a raised cap: its measured peak + margin
    assert done_a.spec.exclusive and done_a.contained_mib > CAP + 256
    assert done_a.started_at is not None and done_b.finished_at is not None
    assert done_a.started_at >= done_b.finished_at
    record = cluster.hctl_json("job", a.id)
    assert record["contained_mib"] == done_a.contained_mib and record["exclusive"] is True
    assert "GpuMemoryExceeded" in (cluster.tmp / "w1.log").read_text()


def test_mps_client_out_of_memory_runs_again_alone(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    record = tmp_path / "mps.jsonl"
    monkeypatch.setenv("PATH", f"{FAKES}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_RECORD", str(record))
    cluster.policy = "horus"
    cluster.start_master()
    cluster.start_worker("w1", "1xV100", "--sharing", "mps")
    cluster.wait_nodes(1)
    with SyncHorusClient.connect(cluster.addr) as client:
        b = client.submit(neighbour(10.0))
        until(lambda: client.get(b.id).state is JobState.RUNNING)
        a = client.submit(grower(6.0))
        done_a = client.wait(a.id, timeout=120)
        done_b = client.wait(b.id, timeout=120)
        first = attempt_log(client, a.id, 1)
    assert done_b.state is JobState.SUCCEEDED and done_b.attempt == 1, done_b.reason
    assert done_a.state is JobState.SUCCEEDED and done_a.attempt == 2, done_a.reason
    assert "CUDA out of memory" in first and "limit 4096 MiB" in first  # MPS' pinned limit held it
    assert done_a.spec.exclusive and done_a.contained_mib >= CAP
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    daemons = [c for c in calls if c["argv"] == ["-f"]]
    quits = [c for c in calls if c["stdin"].strip() == "quit"]
    assert len(daemons) == 1 and daemons[0]["devices"].startswith("GPU-")  # started for the 2nd job
    assert len(quits) == 1 and quits[0]["pipe"] == daemons[0]["pipe"]  # and quit once idle
    assert sys.executable  # (the workloads ran under this interpreter)
