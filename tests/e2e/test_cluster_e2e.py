"""The whole system as real processes: master, two workers, the SDK and hctl."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from horus_core import SyncHorusClient
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import BIN, LocalCluster, env_without_master, free_port, workload_cmd

pytestmark = pytest.mark.timeout(180)


def test_jobs_run_on_distinct_gpus_and_finish(cluster: LocalCluster) -> None:
    cluster.start_master()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    nodes = cluster.wait_nodes(2)
    assert sorted(n["name"] for n in nodes) == ["w1", "w2"]
    assert all(len(n["gpus"]) == 4 for n in nodes)

    with SyncHorusClient.connect(cluster.addr) as client:
        ok = [
            client.submit(JobSpec(command=tuple(workload_cmd(3.0)), gpus=1, name=f"ok-{i}")) for i in range(6)
        ]
        pair = client.submit(JobSpec(command=tuple(workload_cmd(3.0)), gpus=2, name="pair"))
        bad = client.submit(JobSpec(command=(sys.executable, "-c", "import sys; print('boom'); sys.exit(3)")))
        jid = cluster.hctl(
            "submit",
            "--gpus",
            "1",
            "--name",
            "via-hctl",
            "--",
            sys.executable,
            "-c",
            "print('hello from hctl')",
        ).stdout.strip()
        assert jid and "\n" not in jid

        done = [client.wait(j.id, timeout=90) for j in [*ok, pair]]
        assert [j.state for j in done] == [JobState.SUCCEEDED] * 7
        failed = client.wait(bad.id, timeout=60)
        assert failed.state is JobState.FAILED and failed.exit_code == 3
        assert client.wait(jid, timeout=60).state is JobState.SUCCEEDED

        # Exclusive fifo: all 8 GPUs were busy at once, each with exactly one job.
        uuids = [g for j in done for g in j.gpus]
        assert len(uuids) == 8 and len(set(uuids)) == 8, uuids
        assert len(done[-1].gpus) == 2 and len({done[-1].node}) == 1

        assert b"boom" in b"".join(client.logs(bad.id))
    rows = {r["id"]: r for r in cluster.hctl_json("jobs", "--all")}
    assert rows[jid]["state"] == "SUCCEEDED" and len(rows[jid]["gpus"]) == 1 and rows[jid]["node"]
    assert "hello from hctl" in cluster.hctl("logs", jid).stdout


def test_bad_specs_are_refused_with_the_field_named(cluster: LocalCluster) -> None:
    cluster.start_master()
    cluster.start_worker("w1")
    cluster.wait_nodes(1)
    too_many = cluster.hctl("submit", "--gpus", "5", "--", "true", check=False)
    assert too_many.returncode != 0 and "gpus" in too_many.stderr and "Traceback" not in too_many.stderr
    zero = cluster.hctl("submit", "--gpus", "0", "--", "true", check=False)
    assert zero.returncode != 0 and "gpus" in zero.stderr
    with SyncHorusClient.connect(cluster.addr) as client, pytest.raises(InvalidArgument) as err:
        client.submit(JobSpec(command=()))
    assert err.value.field == "command"
    assert cluster.hctl_json("jobs", "--all") == []


def test_unreachable_master_gives_one_clear_line() -> None:
    result = subprocess.run(
        [str(BIN / "hctl"), "--master", f"127.0.0.1:{free_port()}", "jobs"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_without_master(),
    )
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_master_sigkill_loses_no_acknowledged_job(cluster: LocalCluster) -> None:
    cluster.start_master()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.wait_nodes(2)
    starts = cluster.tmp / "starts.txt"
    # Each attempt appends "job:attempt" when it starts, then becomes the workload.
    record = (
        "import os, sys; open(sys.argv[1], 'a').write(os.environ['HORUS_JOB_ID'] + ':' + "
        "os.environ['HORUS_ATTEMPT'] + chr(10)); os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
    )
    cmd = (sys.executable, "-c", record, str(starts), *workload_cmd(4.0)[1:])
    with SyncHorusClient.connect(cluster.addr) as client:
        jobs = [client.submit(JobSpec(command=cmd, gpus=1, name=f"j{i}")) for i in range(12)]
    time.sleep(1.5)  # some run, some wait
    cluster.kill_master()
    cluster.start_master()
    with SyncHorusClient.connect(cluster.addr) as client:
        known = {j.id for j in client.list()}
        assert {j.id for j in jobs} <= known
        finished = [client.wait(j.id, timeout=120) for j in jobs]
    assert all(j.state is JobState.SUCCEEDED for j in finished), [(j.id, j.state, j.reason) for j in finished]
    lines = starts.read_text().split()
    assert len(lines) == len(set(lines)), f"an attempt started twice: {sorted(lines)}"
    # Jobs that ran through the restart kept their attempt: nothing was re-run needlessly.
    assert sum(1 for j in finished if j.attempt == 1) >= 8, [(j.id, j.attempt) for j in finished]
    assert len(cluster.wait_nodes(2)) == 2  # the workers came back on their own
