"""The real daemon as a subprocess: listening line, SIGKILL + restart loses no acknowledged job,
SIGTERM stops it cleanly."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from master_fakes import spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb

ROOT = pathlib.Path(__file__).resolve().parents[2]
START_S = 30.0


@asynccontextmanager
async def daemon(db: pathlib.Path, *extra: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "master.main",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(db),
        "--log-level",
        "WARNING",
        *extra,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), START_S)).decode()
        assert line.startswith("horus-master listening on 127.0.0.1:"), line
        yield proc, int(line.rsplit(":", 1)[1])
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def stub_at(port: int) -> AsyncIterator[cgrpc.HorusServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield cgrpc.HorusServiceStub(ch)  # type: ignore[misc]


async def test_sigkill_restart_keeps_acknowledged_jobs(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "horus.db"
    async with daemon(db) as (proc, port), stub_at(port) as stub:
        acked = await asyncio.gather(
            *(
                stub.SubmitJob(cpb.SubmitJobRequest(request_id=f"r{i}", spec=spec(name=f"j{i}")))
                for i in range(50)
            )
        )
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    async with daemon(db) as (proc, port), stub_at(port) as stub:
        listed = await stub.ListJobs(cpb.ListJobsRequest(page_size=1000))
        assert {j.id for j in listed.jobs} == {r.job.id for r in acked}
        assert all(j.state == pb.JOB_STATE_PENDING for j in listed.jobs)
        again = await stub.SubmitJob(cpb.SubmitJobRequest(request_id="r7", spec=spec()))
        assert not again.created and again.job.id == acked[7].job.id
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), START_S) == 0


async def test_bad_arguments_exit_with_usage(tmp_path: pathlib.Path) -> None:
    for args in (["--policy", "nope"], ["--lease-s", "40"], ["--auth-tokens", str(tmp_path / "missing")]):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "master.main",
            "--db",
            str(tmp_path / "h.db"),
            *args,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), START_S)
        assert proc.returncode == 2, err


async def test_a_busy_port_is_one_clean_line_and_changes_nothing(tmp_path: pathlib.Path) -> None:
    """(Issue 39: gRPC's own bind failure printed a raw ``add_port.cc`` log line first, and the
    database was opened and migrated before.)"""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for flags in (["--listen", f"127.0.0.1:{port}"], ["--http-listen", f"127.0.0.1:{port}"]):
            listen = ["--listen", "127.0.0.1:0"] if flags[0] != "--listen" else []
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "master.main", *listen, *flags, "--db", str(tmp_path / "h.db"),
                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(), START_S)
            assert proc.returncode == 1 and not out, (out, err)
            line = f"horus-master: cannot listen on 127.0.0.1:{port}: Address already in use\n"
            assert err.decode() == line
            assert not (tmp_path / "h.db").exists()


async def test_a_bad_db_is_one_clean_line_and_exit_2(tmp_path: pathlib.Path) -> None:
    """(Issue 39 defect 7: ``--db /proc/h.db``, a folder, a file that is not a database printed a
    traceback.) Each: one line naming the file and why, exit 2, nothing created."""
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"not a database, just some text\n" * 40)
    cases = {
        "/proc/h.db": "cannot create",
        str(tmp_path): "is a folder",
        str(junk): "not a SQLite database",
        str(tmp_path / "missing" / "h.db"): "no such folder",
    }

    async def run(db: str) -> tuple[int | None, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "master.main", "--listen", "127.0.0.1:0", "--db", db,
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), START_S)
        return proc.returncode, err.decode()

    results = await asyncio.gather(*(run(db) for db in cases))
    for (db, why), (code, err) in zip(cases.items(), results, strict=True):
        assert code == 2, (db, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and db in lines[0] and why in lines[0], (db, err)
        assert "Traceback" not in err
    assert junk.read_bytes().startswith(b"not a database")  # (untouched)
    assert not (tmp_path / "missing").exists() and "h.db" not in os.listdir("/proc")
