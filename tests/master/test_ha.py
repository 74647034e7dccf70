"""Leadership over PostgreSQL: the lease row, the fence on every write, standbys answering with
the leader's address, a takeover when the leader goes, and clients following it (docs/ha.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
from collections.abc import AsyncIterator, Callable

import asyncpg
import grpc
import pytest

from horus_core.client import HorusClient, Masters
from horus_core.errors import Unavailable
from horus_core.model import Job, JobSpec, JobState
from master.config import MasterConfig
from master.ha import HaMaster
from master.main import parse_args
from master.store import Store
from master.store import lease as leases
from master.store.jobs import SubmitOp, new_job_id
from master.store.lease import Fence, Fenced
from master.store.target import parse_db
from tests.pgtest import fresh_database

WAIT_S = 40.0  # (a master starting on a loaded machine: compiling, loading)


def job() -> Job:
    return Job(new_job_id(), JobSpec(command=("true",), owner="t"), JobState.PENDING, 1.0, 1.0)


def test_db_urls() -> None:
    assert parse_db("/tmp/h.db").path == pathlib.Path("/tmp/h.db")
    assert parse_db("sqlite:///tmp/h.db").path == pathlib.Path("/tmp/h.db")
    pg = parse_db("postgresql://u:secret@h:5432/db")
    assert pg.postgres and pg.path is None and "secret" not in pg.describe()
    for bad in ("mysql://u@h/db", "postgresql://", "sqlite://", ""):
        with pytest.raises(ValueError, match="--db"):
            parse_db(bad)


def test_master_refuses_an_unknown_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--db", "postgresq://user@host/db"])
    assert "unknown database URL scheme 'postgresq'" in capsys.readouterr().err


def test_the_node_timeout_must_outlast_a_failover(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://u@h/db"
    with pytest.raises(SystemExit):
        parse_args(["--db", url, "--leader-lease-s", "30"])  # node timeout 30 s < 30 + 2 x 2
    assert "--node-timeout-s 30 must be at least --leader-lease-s (30)" in capsys.readouterr().err
    assert parse_args(["--db", url, "--leader-lease-s", "30", "--node-timeout-s", "34"]).leader_lease_s == 30
    parse_args(["--db", "/tmp/h.db", "--leader-lease-s", "30"])  # (SQLite: no standbys, no rule)


async def test_the_fence_stops_a_deposed_leaders_writes() -> None:
    async with fresh_database() as url:
        fence = Fence()
        store = await Store.open(url, fence=fence)
        try:
            with pytest.raises(Fenced):  # not leading: nothing is written
                await store.write(SubmitOp(job(), None))
            conn = await asyncpg.connect(url)
            term = await leases.try_acquire(conn, "a", "a:1", 5.0)
            assert term is not None and term.epoch == 1
            assert await leases.try_acquire(conn, "b", "b:1", 5.0) is None  # held: no takeover
            fence.term = term
            assert (await store.write(SubmitOp(job(), None))).created
            # (the event names the epoch it was written under: migration 0015)
            assert await conn.fetchval("SELECT epoch FROM job_events") == 1
            # Another master takes over (the lease ran out meanwhile: forced here).
            await conn.execute("UPDATE leader_lease SET expires_at = 0")
            other = await leases.try_acquire(conn, "b", "b:1", 5.0)
            assert other is not None and other.epoch == 2
            assert not await leases.renew(conn, term, 5.0)  # the old term cannot renew
            with pytest.raises(Fenced):
                await store.write(SubmitOp(job(), None))
            assert fence.term is None and await store.read.count_jobs() == 1
            terms = await conn.fetch("SELECT epoch, holder FROM leader_terms ORDER BY epoch")
            assert [tuple(t) for t in terms] == [(1, "a"), (2, "b")]
            await conn.close()
        finally:
            await store.close()


async def test_a_write_in_flight_holds_off_a_takeover() -> None:
    """The fence locks the lease row: a takeover waits for the leader's open transaction, and
    the leader's next transaction fails."""
    async with fresh_database() as url:
        fence = Fence()
        store = await Store.open(url, fence=fence)
        conn = await asyncpg.connect(url)
        try:
            fence.term = await leases.try_acquire(conn, "a", "a:1", 1.0)
            raw = await asyncpg.connect(url)
            async with raw.transaction():  # a write of the leader, open
                await raw.execute("SELECT 1 FROM leader_lease WHERE id = 1 FOR SHARE")
                await asyncio.sleep(1.1)  # the lease runs out meanwhile
                takeover = asyncio.ensure_future(leases.try_acquire(conn, "b", "b:1", 5.0))
                await asyncio.sleep(0.3)
                assert not takeover.done()  # blocked on the row until the write commits
            assert (await takeover) is not None
            await raw.close()
            with pytest.raises(Fenced):
                await store.write(SubmitOp(job(), None))
        finally:
            await conn.close()
            await store.close()


def config(url: str, tmp: pathlib.Path, name: str) -> MasterConfig:
    return MasterConfig(
        db_path=tmp / name / "unused.db", db_url=url, data_dir=tmp / name, listen="127.0.0.1:0",
        leader_lease_s=1.5, heartbeat_s=0.5, tick_s=0.2, shutdown_grace_s=0.2,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def running(ha: HaMaster) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(ha.run(stop))
    await asyncio.wait_for(ha.ready.wait(), WAIT_S)
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_S)


async def until(cond: Callable[[], bool], within_s: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + within_s
    while not cond():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.05)


async def test_standby_redirects_and_takes_over(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="master.ha")
    async with fresh_database() as url:
        a, b = (
            HaMaster(config(url, tmp_path, "a"), holder="a"),
            HaMaster(config(url, tmp_path, "b"), holder="b"),
        )
        async with running(a) as stop_a:
            await until(lambda: a.master is not None)
            async with running(b):
                await asyncio.sleep(0.6)
                assert b.master is None  # a standby: it leads nothing
                # (issue 39: a standby says that it stands by, and whom it follows)
                said = [r.getMessage() for r in caplog.records if r.name == "master.ha"]
                assert f"standing by at 127.0.0.1:{b.port} as b" in " ".join(said)
                assert f"standby: following the leader at 127.0.0.1:{a.port} (epoch 1, a)" in said
                # One address, the standby's: the client follows it to the leader.
                async with HorusClient.connect(f"127.0.0.1:{b.port}", timeout=5) as c:
                    made = await c.submit(JobSpec(command=("true",), gpus=1), request_id="r1")
                    assert c.target == f"127.0.0.1:{a.port}"
                    roles = {m: role for m, role, _ in await c.probe_masters()}
                    assert roles == {f"127.0.0.1:{b.port}": "standby", f"127.0.0.1:{a.port}": "leader"}
                stop_a.set()  # a clean stop gives the lease up: b leads at once
                await until(lambda: b.master is not None, 5.0)
                assert b.term is not None and b.term.epoch == 2
                said = [r.getMessage() for r in caplog.records if r.name == "master.ha"]
                assert "standby: no leader holds the lease; taking it" in said
                masters = f"127.0.0.1:{a.port},127.0.0.1:{b.port}"
                async with HorusClient.connect(masters, timeout=5) as c:
                    again = await c.submit(JobSpec(command=("true",), gpus=1), request_id="r1")
                    assert again.id == made.id  # the retried submit found the first one
                    assert c.target == f"127.0.0.1:{b.port}"


async def test_a_stopped_leader_is_deposed_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    """A leader whose lease ran out (its process stalled past it) finds the fence closed, steps
    down, and stands by for the next term."""
    async with fresh_database() as url:
        a, b = (
            HaMaster(config(url, tmp_path, "a"), holder="a"),
            HaMaster(config(url, tmp_path, "b"), holder="b"),
        )
        async with running(a), running(b):
            await until(lambda: a.master is not None or b.master is not None)
            old = a.master if a.master is not None else b.master  # (either may win)
            assert old is not None
            conn = await asyncpg.connect(url)
            await conn.execute("UPDATE leader_lease SET expires_at = 0")  # as if a stalled past it
            # A new term (either master may win it: the deposed one campaigns again at once).
            await until(lambda: any(h.term is not None and h.term.epoch > 1 for h in (a, b)))
            with pytest.raises(Unavailable):  # the old term's store writes nothing
                await old.store.write(SubmitOp(job(), None))
            # A new leader, and the old one stepped down (it learns so at its next renewal, which
            # may come after the new term has started serving).
            await until(
                lambda: (
                    any(h.master is not None and h.master is not old for h in (a, b))
                    and all(h.master is not old for h in (a, b))
                )
            )
            assert a.master is not old and b.master is not old and (await leases.read_lease(conn)).epoch > 1
            await conn.close()


def test_masters_follow_the_leader() -> None:
    m = Masters("a:1, b:2,c:3")
    assert m.known == ["a:1", "b:2", "c:3"] and m.current == "a:1"
    m.rotate()
    assert m.current == "b:2"
    with pytest.raises(ValueError):
        Masters(" , ")


class _Err(grpc.aio.AioRpcError):
    def __init__(self, hint: str | None) -> None:
        md = grpc.aio.Metadata(("horus-leader", hint)) if hint is not None else grpc.aio.Metadata()
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), md, "standby")


def test_a_standby_answer_names_the_leader() -> None:
    m = Masters("a:1,b:2")
    assert m.after(_Err("d:4")) and m.current == "d:4" and "d:4" in m.known
    assert not m.after(_Err(None)) and m.current == "a:1"  # no answer: the next one listed
    assert m.after(_Err("")) and m.current == "b:2"  # a standby that knows no leader: try on
