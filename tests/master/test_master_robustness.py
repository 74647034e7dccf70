"""Issue 15, store half: non-finite numbers, bad stored rows, spec size bounds, read-your-writes,
clear errors for malformed requests, per-user request ids, mounts/workdir and ListGpus access."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import sqlite3
import subprocess
import sys
from typing import Any

import grpc
import pytest
from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import JobSpec
from horus_core.validation import MAX_ARG_BYTES, MAX_EXEC_BYTES, MAX_SPEC_BYTES, exec_size, spec_size
from master.auth import TokenTable
from master.config import MAX_MESSAGE_BYTES
from master.services.access import Identity

BAD = grpc.StatusCode.INVALID_ARGUMENT


async def code_of(coro: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await coro
    code: grpc.StatusCode = err.value.code()
    return code


# ------------------------------------------------------------------------------- NaN and inf


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
async def test_non_finite_numbers_are_rejected_and_change_nothing(
    tmp_path: pathlib.Path, value: float
) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        for bad in (spec(cpus=value), spec(hints=pb.ProfileHints(util_avg=value))):
            assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=bad))) is BAD
        listed = await stub.ListJobs(cpb.ListJobsRequest())
        assert list(listed.jobs) == []
        ok = await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(cpus=2.0)))
        assert ok.created


# --------------------------------------------------------------------------- bad stored rows


def corrupt(db: pathlib.Path, job_id: str, spec_text: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE jobs SET spec = ? WHERE id = ?", (spec_text, job_id))


async def test_bad_rows_never_stop_reads_scheduling_or_cancel(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "horus.db"
    async with running_master(tmp_path) as m, client_for(m) as stub:
        ids = [(await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job.id for _ in range(4)]
    corrupt(db, ids[0], "{not json")
    corrupt(db, ids[1], '{"command":["sleep","1"],"gpus":1,"cpus":NaN}')  # what an old master wrote
    placed: list[str] = []
    for restart in range(2):
        async with running_master(tmp_path) as m, client_for(m) as stub:
            listed = await stub.ListJobs(cpb.ListJobsRequest())
            states = {j.id: j.state for j in listed.jobs}
            assert states[ids[0]] == states[ids[1]] == pb.JOB_STATE_FAILED and len(states) == 4 + restart
            bad = await stub.GetJob(cpb.GetJobRequest(job_id=ids[0]))
            assert "stored row unreadable" in bad.reason
            assert (await stub.GetJob(cpb.GetJobRequest(job_id=ids[2]))).state != pb.JOB_STATE_FAILED
            w = FakeWorker(m.port, f"node-{restart}", n_gpus=1)
            await w.connect()
            await m.scheduler.run_once()
            placed.append((await w.recv_kind("assign")).job_id)
            assert sorted(placed) == sorted(set(placed)) and set(placed) <= {ids[2], ids[3]}
            new = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job
            cancelled = await stub.CancelJob(cpb.CancelJobRequest(job_id=new.id))
            assert cancelled.state == pb.JOB_STATE_CANCELLED
            failed = stub.CancelJob(cpb.CancelJobRequest(job_id=ids[0]))
            assert await code_of(failed) is grpc.StatusCode.FAILED_PRECONDITION
            await w.close()
    with sqlite3.connect(db) as conn:  # marked FAILED for good, the stored text kept as evidence
        row = conn.execute("SELECT state, spec FROM jobs WHERE id = ?", (ids[0],)).fetchone()
    assert row == ("FAILED", "{not json")


# ------------------------------------------------------------------------------ size bounds


def largest_spec(allow: str) -> JobSpec:
    """A spec at the size limits: argv fills the execve budget, mounts fill the rest."""
    n_args = MAX_EXEC_BYTES // (MAX_ARG_BYTES + 9)
    command = ["x" * MAX_ARG_BYTES] * n_args
    command.append("y" * (MAX_EXEC_BYTES - exec_size(JobSpec(tuple(command))) - 9))
    base = JobSpec(tuple(command), owner="anonymous")
    room = MAX_SPEC_BYTES - spec_size(base)
    mount = f"{allow}/" + "m" * 2000 + ":/c"
    mounts = [mount] * (room // (len(mount) + 8) - 1)
    deficit = MAX_SPEC_BYTES - spec_size(JobSpec(tuple(command), owner="anonymous", mounts=tuple(mounts)))
    mounts.append(f"{allow}/" + "n" * (deficit - 8 - len(allow) - 4) + ":/c")
    out = JobSpec(tuple(command), owner="anonymous", mounts=tuple(mounts))
    assert exec_size(out) == MAX_EXEC_BYTES and spec_size(out) == MAX_SPEC_BYTES
    return out


def to_pb(s: JobSpec) -> pb.JobSpec:
    return pb.JobSpec(command=list(s.command), gpus=1, mounts=list(s.mounts))


async def test_largest_spec_fits_every_message_and_one_more_byte_is_refused(tmp_path: pathlib.Path) -> None:
    big = largest_spec("/data")
    async with running_master(tmp_path, allow_mounts=("/data",)) as m, client_for(m) as stub:
        ids = []
        for _ in range(4):
            resp = await stub.SubmitJob(cpb.SubmitJobRequest(spec=to_pb(big)))
            assert resp.ByteSize() < MAX_MESSAGE_BYTES and list(resp.job.spec.command) == list(big.command)
            ids.append(resp.job.id)
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=ids[0]))).spec.mounts == list(big.mounts)
        seen, token = [], ""
        while True:
            page = await stub.ListJobs(cpb.ListJobsRequest(page_size=1000, page_token=token))
            assert page.ByteSize() < MAX_MESSAGE_BYTES
            seen += [j.id for j in page.jobs]
            if not (token := page.next_page_token):
                break
        assert seen == ids
        w = FakeWorker(m.port, "node-a", n_gpus=1)
        await w.connect()
        assignment = await w.recv_kind("assign")
        assert list(assignment.spec.command) == list(big.command)
        await w.close()
        over = to_pb(big)
        over.mounts[-1] = over.mounts[-1].replace(":/c", "n:/c")
        assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=over))) is BAD
        over = to_pb(big)
        over.command[-1] += "y"
        assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=over))) is BAD
        one_long = pb.JobSpec(command=["echo", "z" * (MAX_ARG_BYTES + 1)], gpus=1)
        assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=one_long))) is BAD
        assert len((await stub.ListJobs(cpb.ListJobsRequest(page_size=1000))).jobs) <= 4


# --------------------------------------------------------------------------- read-your-writes


async def test_a_read_sees_every_write_acknowledged_before_it(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        for _ in range(100):
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))
        stop = asyncio.Event()

        async def lister() -> None:
            while not stop.is_set():
                await stub.ListJobs(cpb.ListJobsRequest(page_size=200))

        listers = [asyncio.create_task(lister()) for _ in range(4)]
        missed = 0
        try:
            for _ in range(100):
                job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job
                try:
                    await stub.GetJob(cpb.GetJobRequest(job_id=job.id))
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is grpc.StatusCode.NOT_FOUND
                    missed += 1
        finally:
            stop.set()
            await asyncio.gather(*listers)
        assert missed == 0


# ----------------------------------------------------------------------------- clear errors


async def test_malformed_requests_get_invalid_argument_without_a_traceback(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running_master(tmp_path) as m, grpc.aio.insecure_channel(f"127.0.0.1:{m.port}") as ch:
        for method in ("GetJob", "SubmitJob", "ListJobs", "CancelJob", "GetLogs"):
            for raw in (b"\xff\xff\xff", b"\x0a\x02\xff\xfe"):
                if method == "GetLogs":
                    call: Any = ch.unary_stream(f"/horus.v1.HorusService/{method}")(raw)
                    assert await code_of(call.read()) is BAD
                else:
                    assert await code_of(ch.unary_unary(f"/horus.v1.HorusService/{method}")(raw)) is BAD
        stream = ch.stream_stream("/horus.v1.WorkerService/Connect")()
        await stream.write(b"\xff\xff")
        assert await code_of(stream.read()) is BAD
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_hctl_submit_of_invalid_utf8_is_a_clear_error() -> None:
    code = "import sys; from horus_core.cli.main import main; sys.exit(main())"
    argv = [sys.executable.encode(), b"-c", code.encode(), b"submit", b"--gpus", b"1", b"--", b"\xff"]
    done = subprocess.run(argv, capture_output=True, timeout=60)
    assert done.returncode == 2
    assert b"not valid UTF-8" in done.stderr and b"Traceback" not in done.stderr


# ------------------------------------------------------------------- leaks and loose validation


@pytest.mark.parametrize("rid", ["a\x00b", "line\nbreak", "tab\there", "x" * 129])
async def test_bad_request_ids_are_refused(tmp_path: pathlib.Path, rid: str) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(request_id=rid, spec=spec()))) is BAD
        assert list((await stub.ListJobs(cpb.ListJobsRequest())).jobs) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workdir", "relative/dir"),
        ("workdir", "/a\nb"),
        ("mounts", ["/etc:/etc"]),
        ("mounts", ["/data/x"]),
        ("mounts", ["/data/../etc:/x"]),
        ("mounts", ["/data/x:relative"]),
        ("mounts", ["/data/x:/y:rx"]),
    ],
)
async def test_workdir_and_mounts_are_checked_at_submit(
    tmp_path: pathlib.Path, field: str, value: Any
) -> None:
    async with running_master(tmp_path, allow_mounts=("/data",)) as m, client_for(m) as stub:
        assert await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(**{field: value})))) is BAD
        ok = spec(workdir="/work", mounts=["/data/x:/x:ro", "/data:/d"])
        assert (await stub.SubmitJob(cpb.SubmitJobRequest(spec=ok))).created


async def test_no_host_mounts_without_an_allow_list(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        err = await code_of(stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(mounts=["/data:/d"]))))
        assert err is BAD


def md(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def test_list_gpus_shows_a_user_only_their_own_job_ids(tmp_path: pathlib.Path) -> None:
    tokens = TokenTable(
        {"tok-alice": Identity("alice"), "tok-bob": Identity("bob"), "tok-root": Identity("root", admin=True)}
    )
    async with running_master(tmp_path, tokens=tokens) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=1)
        await w.connect()
        job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()), metadata=md("tok-alice"))).job
        assert (await w.recv_kind("assign")).job_id == job.id

        async def ids(token: str) -> list[str]:
            gpus = (await stub.ListGpus(cpb.ListGpusRequest(), metadata=md(token))).gpus
            assert len(gpus) == 1
            return list(gpus[0].job_ids)

        assert await ids("tok-alice") == [job.id]
        assert await ids("tok-root") == [job.id]
        assert await ids("tok-bob") == []
        await w.close()
