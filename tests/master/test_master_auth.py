"""Bearer-token auth on the client plane: users see and cancel their own jobs, admins all."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import grpc
import pytest
from master_fakes import FakeWorker, client_for, config, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from master.auth import TokenTable

TOKENS = "tok-alice alice\ntok-bob bob  # a comment\n\ntok-root root admin\n"


def md(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def submit_as(stub: cgrpc.HorusServiceAsyncStub, token: str, **kw: object) -> str:
    resp = await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(**kw)), metadata=md(token))
    return resp.job.id


def test_token_file_parsing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    table = TokenTable.load(path)
    alice, root = table.identify("Bearer tok-alice"), table.identify("Bearer tok-root")
    assert alice is not None and alice.user == "alice" and not alice.admin
    assert root is not None and root.admin
    assert table.identify("Bearer nope") is None and table.identify("tok-alice") is None
    assert table.identify(None) is None
    for bad in ("tok-a\n", "tok-a alice superuser\n", "t a\nt b\n", "# nothing\n"):
        path.write_text(bad)
        with pytest.raises(ValueError):
            TokenTable.load(path)


async def test_auth_on(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    async with running_master(tmp_path, auth_tokens=path, join_token="jt") as m, client_for(m) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListJobs(cpb.ListJobsRequest(), metadata=md("tok-mallory"))
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.WatchJobs(cpb.WatchJobsRequest()).read()
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED

        a = await submit_as(stub, "tok-alice", owner="bob")  # the owner is the caller, not the spec
        b = await submit_as(stub, "tok-bob")
        got = await stub.GetJob(cpb.GetJobRequest(job_id=a), metadata=md("tok-alice"))
        assert got.spec.owner == "alice"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetJob(cpb.GetJobRequest(job_id=a), metadata=md("tok-bob"))
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CancelJob(cpb.CancelJobRequest(job_id=a), metadata=md("tok-bob"))
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListJobs(cpb.ListJobsRequest(owner="alice"), metadata=md("tok-bob"))
        assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED

        mine = await stub.ListJobs(cpb.ListJobsRequest(), metadata=md("tok-bob"))
        assert [j.id for j in mine.jobs] == [b]
        everyone = await stub.ListJobs(cpb.ListJobsRequest(), metadata=md("tok-root"))
        assert [j.id for j in everyone.jobs] == [a, b]
        cancelled = await stub.CancelJob(cpb.CancelJobRequest(job_id=a), metadata=md("tok-root"))
        assert cancelled.reason == "cancelled by root"

        # request ids are per user: the same id from two users makes two jobs, reveals nothing
        same = cpb.SubmitJobRequest(request_id="same", spec=spec())
        r1 = await stub.SubmitJob(same, metadata=md("tok-alice"))
        rb = await stub.SubmitJob(same, metadata=md("tok-bob"))
        assert rb.created and rb.job.id != r1.job.id and rb.job.spec.owner == "bob"
        r2 = await stub.SubmitJob(same, metadata=md("tok-alice"))
        assert r1.job.id == r2.job.id and not r2.created
        rb2 = await stub.SubmitJob(same, metadata=md("tok-bob"))
        assert rb2.job.id == rb.job.id and not rb2.created


async def test_auth_off_owner_from_spec(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        resp = await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(owner="carol")), metadata=md("anything"))
        assert resp.job.spec.owner == "carol"
        listed = await stub.ListJobs(cpb.ListJobsRequest(owner="carol"))
        assert [j.id for j in listed.jobs] == [resp.job.id]


def test_client_auth_without_a_worker_credential_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    with pytest.raises(ValueError, match="worker plane has no credential"):
        config(tmp_path, auth_tokens=path)
    assert config(tmp_path, auth_tokens=path, join_token="jt").worker_credential() == "a join token"
    cli = [sys.executable, "-m", "master.main", "--db", str(tmp_path / "x.db"), "--auth-tokens", str(path)]
    out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--join-token or --tls-client-ca" in out.stderr
    assert not (tmp_path / "x.db").exists()  # refused before anything was created


async def test_with_client_auth_a_worker_without_the_join_token_cannot_register(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    async with running_master(tmp_path, auth_tokens=path, join_token="jt") as m:
        for token in ("", "wrong"):
            w = FakeWorker(m.port, "node-a", token=token)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await w.connect()
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
            await w.crash()
        assert m.core.registry.get("node-a") is None
        good = FakeWorker(m.port, "node-a", token="jt")
        await good.connect()
        assert m.core.registry.get("node-a").identity == "join-token"  # type: ignore[union-attr]
        await good.close()


def test_the_master_says_at_start_which_worker_credential_is_in_force(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    cli = [sys.executable, "-m", "master.main", "--db", str(tmp_path / "x.db"), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*cli, "--auth-tokens", str(path), "--join-token", "jt"], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "worker plane credential" in line:
                break
        assert "worker plane credential: a join token" in seen[-1], seen
        assert "kill grace 5 s, node timeout 30 s" in seen[-1]
    finally:
        proc.terminate()
        proc.wait(20)
        if proc.stderr is not None:
            proc.stderr.close()
