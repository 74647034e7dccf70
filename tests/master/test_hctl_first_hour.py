"""``hctl`` as a new user meets it, against a live master (issue 29, items 10-12): real
subprocesses of hctl, a real gRPC server and SQLite file, fake workers on the real stream."""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys

import pytest
from master_fakes import FakeWorker, client_for, running_master, spec, token_file

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.queues.config import ANY_TYPE as CONFIG_ANY_TYPE
from horus_core.queueusage import ANY_TYPE, QueueUsage, quota_warnings
from horus_core.testing import queue_file, queue_table, queues_toml
from master.app import Master


async def hctl(m: Master, *args: str, token: str = "") -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HORUS_MASTER", "HORUS_TOKEN")}
    if token:
        env["HORUS_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "horus_core.cli", "--master", f"127.0.0.1:{m.port}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_typos_are_named_with_the_known_names(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, policy="horus") as m:
        w = FakeWorker(m.port, "n1")
        await w.connect()
        code, out, err = await hctl(
            m, "submit", "--gpus", "1", "--type", "resnet18", "--gpu-type", "v100,vv100", "--", "true"
        )
        assert code == 0 and out.strip() and "hctl: warning: unknown job type 'resnet18'" in err
        assert "hctl: warning: unknown GPU type 'vv100' (the cluster has v100); did you mean 'v100'?" in err
        code, out, err = await hctl(m, "submit", "--gpus", "1", "--gpu-type", "v10O", "--", "true")
        assert code == 2 and not out and "unknown GPU type 'v10o'; did you mean 'v100'?" in err, err
        assert "known GPU types: k80, p100, v100" in err
        code, out, err = await hctl(m, "submit", "--gpus", "1", "--gpu-type", "v100,a100", "--", "true")
        assert code == 0 and out.strip() and "warning" not in err, err  # (the README's own example)
        code, out, err = await hctl(m, "submit", "--gpus", "1", "--gpu-type", "a100", "--", "true")
        assert code == 0 and "no node has GPU type 'a100' (the cluster has v100)" in err
        assert "the job waits until such a node joins" in err
        code, _, err = await hctl(m, "submit", "--gpus", "1", "--gpus-type", "v100", "--", "true")
        assert code == 2 and "usage: hctl submit" in err
        assert "unrecognized arguments: --gpus-type (did you mean --gpu-type?)" in err
        code, out, _ = await hctl(m, "info")
        assert code == 0 and "GPU types:" in out and "v100" in out, out
        assert "Job types with a profile" in out and "  ResNet-18 (batch size 32)" in out
        await w.close()


async def test_jobs_cancel_and_job_say_what_happened(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        failed = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(name="quick")))).job.id
        await w.run_next()
        await w.update(failed, 1, pb.JOB_STATE_FAILED, exit_code=3)
        await w.barrier()
        running = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(name="long")))).job.id
        await w.run_next()
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="n1", action=cpb.NODE_SERVICE_ACTION_DRAIN))
        await m.scheduler.run_once()  # preempted: pending again, its last attempt was on n1
        code, out, _ = await hctl(m, "jobs")
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
        assert rows[failed][2] == "FAILED"  # ended a moment ago: still listed
        assert rows[running][2] == "PENDING" and rows[running][5:7] == ["-", "-"]  # no node, no speed
        code, out, _ = await hctl(m, "jobs", "--recent", "0")
        assert failed not in out
        code, out, _ = await hctl(m, "job", running)
        assert "Last preempted" in out and "preempted: node n1 is drained" in out
        assert "Predicted speed" in out and "Predicted slowdown" not in out
        await stub.SetNodeService(
            cpb.SetNodeServiceRequest(node="n1", action=cpb.NODE_SERVICE_ACTION_UNCORDON)
        )
        await w.recv_kind("kill")
        await w.update(running, 1, pb.JOB_STATE_CANCELLED)
        await w.barrier()
        await w.run_next()  # attempt 2
        code, out, _ = await hctl(m, "cancel", running)
        assert (
            code == 0
            and out.strip() == f"{running} cancelling: its attempt on n1 is stopping (hctl wait {running})"
        )
        await w.close()


async def test_an_auth_error_names_the_token_variable(tmp_path: pathlib.Path) -> None:
    path = token_file(tmp_path, "tok-a alice")
    async with running_master(tmp_path, auth_tokens=path, join_token="jt") as m:
        code, _, err = await hctl(m, "jobs")
        assert code == 1 and "HORUS_TOKEN" in err and "--token" in err
        code, _, _ = await hctl(m, "jobs", token="tok-a")
        assert code == 0


async def test_hctl_queues_warns_when_the_quotas_exceed_the_cluster(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    queues = queues_toml(queue_table("a", {"v100": 2, "*": 1}), queue_table("b", {"v100": 1}))
    async with running_master(tmp_path, queues=queue_file(tmp_path, queues)) as m:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        code, out, err = await hctl(m, "queues")
        assert code == 0 and "a" in out
        assert (
            "hctl: warning: the queues' quotas of v100 GPUs add up to 3 (a 2, b 1); the cluster has 2" in err
        )
        assert "the queues' quotas add up to 4 GPUs (a 3, b 1); the cluster has 2" in err
        logged = [r.getMessage() for r in caplog.records if r.name == "master.services.queues"]
        assert any("quotas of v100 GPUs add up to 3" in line for line in logged)
        await w.close()


def test_quota_warnings_name_each_type_and_the_total() -> None:
    rows = [QueueUsage("a", {"v100": 4, "*": 2}), QueueUsage("b", {"v100": 4})]
    assert quota_warnings(rows, {"v100": 8, "k80": 4}) == []  # the "*" 2 fit on the K80s
    assert quota_warnings(rows, {"v100": 8}) == [
        "the queues' quotas add up to 10 GPUs (a 6, b 4); the cluster has 8"
    ]
    assert ANY_TYPE == CONFIG_ANY_TYPE
