"""The store: migrations, group commit, durability, and a failing write not hurting its batch;
each test on SQLite and on PostgreSQL (the ``db`` fixture, tests/pgtest.py)."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
import threading
from dataclasses import replace
from typing import Any

import asyncpg
import pytest
from master_fakes import client_for, running_master, spec

from horus_core.errors import Unavailable
from horus_core.gen import client_pb2 as cpb
from horus_core.model import Job, JobSpec, JobState, ProfileHints
from master.services import transitions as tr
from master.store import Store
from master.store.db import migrations_from, packaged_migrations
from master.store.jobs import QuarantineOp, SetPendingReasonOp, SubmitOp, TransitionOp, new_job_id
from master.store.pg import await_, is_pg
from master.store.writer import Conn, WriteOp
from tests.pgtest import Db


def job(**kw: Any) -> Job:
    return Job(
        new_job_id(),
        JobSpec(command=("true",), owner="t"),
        JobState.PENDING,
        submitted_at=1.0,
        updated_at=1.0,
        **kw,
    )


async def versions(db: Db) -> list[tuple[object, ...]]:
    return await db.rows("SELECT version, name FROM schema_version ORDER BY version")


def copy_migrations(folder: pathlib.Path, numbers: set[int] | None = None) -> None:
    """The packaged migrations (those of ``numbers``) into ``folder``, overrides included."""
    (folder / "postgresql").mkdir(parents=True)
    for mig in packaged_migrations():
        if numbers is None or mig.version in numbers:
            (folder / mig.name).write_text(mig.sql)
            if mig.pg_sql is not None:
                (folder / "postgresql" / mig.name).write_text(mig.pg_sql)


async def test_migrations_applied_once(tmp_path: pathlib.Path, db: Db) -> None:
    for _ in range(2):
        store = await Store.open(db.target)
        await store.close()
    packaged = [(m.version, m.name) for m in packaged_migrations()]
    assert packaged[:2] == [(1, "0001_init.sql"), (2, "0002_learning.sql")]
    assert await versions(db) == packaged
    folder = tmp_path / "migs"
    copy_migrations(folder)
    nxt = packaged[-1][0] + 1  # numbers may skip (0004 came before 0003)
    extra = f"{nxt:04d}_extra.sql"
    (folder / extra).write_text("CREATE TABLE extra (x INTEGER, y REAL);")  # (REAL: float8 on PG)
    (folder / "README.txt").write_text("not a migration")
    for _ in range(2):
        store = await Store.open(db.target, migrations=migrations_from(folder))
        await store.close()
    assert await versions(db) == [*packaged, (nxt, extra)]
    if db.pg:
        kinds = await db.rows("SELECT data_type FROM information_schema.columns WHERE table_name = 'extra'")
        assert sorted(kinds) == [("double precision",), ("integer",)]
    else:
        with sqlite3.connect(db.target) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_failed_migration_leaves_nothing(tmp_path: pathlib.Path, db: Db) -> None:
    folder = tmp_path / "migs"
    copy_migrations(folder, {1})
    (folder / "0002_bad.sql").write_text("CREATE TABLE t2 (x INTEGER); THIS IS NOT SQL;")
    with pytest.raises(asyncpg.PostgresSyntaxError if db.pg else sqlite3.Error):
        await Store.open(db.target, migrations=migrations_from(folder))
    assert await versions(db) == [(1, "0001_init.sql")]
    if db.pg:
        assert await db.rows("SELECT 1 FROM information_schema.tables WHERE table_name = 't2'") == []
    else:
        with sqlite3.connect(db.target) as conn:
            assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't2'").fetchone() is None


def test_an_override_needs_its_migration(tmp_path: pathlib.Path) -> None:
    copy_migrations(tmp_path, {1})
    (tmp_path / "postgresql" / "0002_orphan.sql").write_text("SELECT 1;")
    with pytest.raises(RuntimeError, match="overrides no migration"):
        migrations_from(tmp_path)


async def test_concurrent_submits_group_commit_and_are_durable(tmp_path: pathlib.Path, db: Db) -> None:
    url = db.target if db.pg else ""
    async with (
        running_master(tmp_path, db_path=tmp_path / "horus.db", db_url=url) as m,
        client_for(m) as stub,
    ):
        resps = await asyncio.gather(
            *(
                stub.SubmitJob(cpb.SubmitJobRequest(request_id=f"r{i % 250}", spec=spec(name=f"j{i}")))
                for i in range(500)
            )
        )
    assert sum(r.created for r in resps) == 250
    acked = {r.job.id for r in resps}
    # reopened: everything acknowledged is there
    stored = {row[0] for row in await db.rows("SELECT id FROM jobs")}
    ((events,),) = await db.rows("SELECT COUNT(*) FROM job_events WHERE to_state = 'PENDING'")
    assert stored == acked and len(stored) == 250 and events == 250


class Gate(WriteOp[None]):
    """Holds the writer inside a transaction until released (on PostgreSQL the op runs on the
    loop: it waits there, as a statement would)."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.released = asyncio.Event()

    def open(self) -> None:
        self.release.set()
        self.released.set()

    def apply(self, conn: Conn) -> None:
        self.entered.set()
        if is_pg(conn):
            await_(asyncio.wait_for(self.released.wait(), 10))
        else:
            self.release.wait(10)


async def test_writes_queued_during_a_commit_share_the_next_one(db: Db) -> None:
    store = await Store.open(db.target)
    gate = Gate()
    held = asyncio.ensure_future(store.write(gate))
    await asyncio.to_thread(gate.entered.wait, 10)
    waiting = [asyncio.ensure_future(store.write(SubmitOp(job(), f"r{i}"))) for i in range(50)]
    await asyncio.sleep(0)  # one turn of the loop: all 50 are queued behind the open transaction
    assert not any(w.done() for w in waiting)  # nothing is acknowledged before its commit
    gate.open()
    await held
    results = await asyncio.gather(*waiting)
    assert all(r.created for r in results)
    assert (store.writer.stats.batches, store.writer.stats.largest_batch) == (2, 50)
    await store.close()


class Boom(WriteOp[None]):
    def apply(self, conn: Conn) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")


async def test_a_failing_write_does_not_fail_its_batch(db: Db) -> None:
    store = await Store.open(db.target)
    ops: list[WriteOp[Any]] = [SubmitOp(job(), None), Boom(), SubmitOp(job(), f"r{1}")]
    results = await asyncio.gather(*(store.write(op) for op in ops), return_exceptions=True)
    assert isinstance(results[1], asyncpg.UndefinedTableError if db.pg else sqlite3.OperationalError)
    assert not isinstance(results[0], BaseException) and not isinstance(results[2], BaseException)
    assert await store.read.count_jobs() == 2
    await store.close()
    with pytest.raises(Unavailable):
        await store.write(SubmitOp(job(), None))


async def test_job_id_collision_draws_a_new_id(db: Db) -> None:
    store = await Store.open(db.target)
    a = Job("0123456789ab", JobSpec(command=("true",), owner="t"), JobState.PENDING)
    first, second = await asyncio.gather(store.write(SubmitOp(a, "one")), store.write(SubmitOp(a, "two")))
    assert first.created and second.created and first.row.job.id == "0123456789ab"
    assert second.row.job.id != "0123456789ab" and await store.read.count_jobs() == 2
    await store.close()


async def test_per_request_mode_commits_each_write(db: Db) -> None:
    store = await Store.open(db.target, group_commit=False)
    await asyncio.gather(*(store.write(SubmitOp(job(), None)) for _ in range(20)))
    assert store.writer.stats.batches == 20 and store.writer.stats.largest_batch == 1
    await store.close()


async def test_duplicate_request_ids_within_one_batch(db: Db) -> None:
    store = await Store.open(db.target)
    results = await asyncio.gather(*(store.write(SubmitOp(job(), "same")) for _ in range(10)))
    assert sum(r.created for r in results) == 1 and len({r.row.job.id for r in results}) == 1
    await store.close()


async def test_live_jobs_and_versions(db: Db) -> None:
    """The live read (what the master's index is built from): pending and active rows in
    submission order, equal to single-row reads; each committed change adds one to the version."""
    store = await Store.open(db.target)
    try:
        hinted = JobSpec(("x",), gpus=2, owner="t", job_type="A3C", hints=ProfileHints(10.0, 20.0, 900),
                         env=(("A", "1"),), mounts=("/data",), total_steps=50, priority=1)  # fmt: skip
        jobs = [job(), job(), replace(job(), spec=hinted)]
        for j in jobs:
            await store.write(SubmitOp(j, None))
        first = await store.read.live_jobs()
        assert [r.job for r in first] == [r.job for r in [await store.read.job(j.id) for j in jobs] if r]
        assert [r.job.version for r in first] == [0, 0, 0] and first[2].job.spec == hinted

        a, b, c = (j.id for j in jobs)
        now = 5.0
        todo = ((b, tr.assign("n1", ("g0", "g1"), 0.5, now)), (c, tr.cancel("by test", now, node_lost=False)))
        changes = await store.write(TransitionOp(todo))
        assert [ch.after.job.version for ch in changes] == [1, 1]
        late = job()
        await store.write(SubmitOp(late, None))
        await store.write(TransitionOp(((b, tr.set_wait_reason("x", now)), (b, tr.requeue("lost", now)))))
        second = await store.read.live_jobs()
        assert [r.job.id for r in second] == [a, b, late.id]
        assert second[1].job.state is JobState.PENDING and second[1].job.version == 2
        assert await store.write(SetPendingReasonOp("no ready nodes")) == 3
        assert [r.job.version for r in await store.read.live_jobs()] == [1, 3, 1]
    finally:
        await store.close()


async def test_a_transition_takes_a_held_row_only_at_the_stored_version(db: Db) -> None:
    """(The master hands a pass's write the rows its live index holds: a held row whose version
    is the stored one is the stored row and is not read again; any other is read.)"""
    hinted = JobSpec(("x",), gpus=2, owner="t", job_type="A3C", hints=ProfileHints(10.0, 20.0, 900))
    store = await Store.open(db.target)
    try:
        held = {}  # as the index holds them from the submissions: version 0 (and no seq)
        for i in range(4):
            made = await store.write(
                SubmitOp(replace(job(), id=f"j{i}", spec=hinted if i % 2 else job().spec), None)
            )
            held[made.row.job.id] = made.row
        await store.write(TransitionOp((("j1", tr.set_wait_reason("moved on", 2.0)),)))  # j1: version 1
        marked = replace(held["j2"], job=replace(held["j2"].job, reason="as held"))  # (same version)
        todo = (
            ("j0", tr.assign("n1", ("g0",), 0.5, 3.0)),
            ("j1", tr.set_wait_reason("busy", 3.0, "Resources")),
            ("j2", tr.set_wait_reason("busy", 3.0, "Resources")),
            ("j9", tr.set_wait_reason("gone", 3.0)),  # (no such job: skipped)
        )
        changes = await store.write(TransitionOp(todo, {**held, "j2": marked}))
        before = {c.before.job.id: c.before for c in changes}
        assert sorted(before) == ["j0", "j1", "j2"]
        assert (
            before["j1"].job.reason == "moved on" and before["j1"].job.version == 1
        )  # read: not the stale row
        assert before["j1"].job.spec == hinted  # (read without its spec: the held one's)
        assert before["j2"].job.reason == "as held"  # taken as held: not read
        stored = {r.job.id: r for r in await store.read.live_jobs()}
        first = await store.read.job("j0")
        assert before["j0"].job == held["j0"].job and first is not None and before["j0"].seq == first.seq > 0
        assert [c.after.job for c in changes] == [stored[i].job for i in ("j0", "j1", "j2")]
    finally:
        await store.close()


async def test_a_quarantined_row_gets_a_new_version(db: Db) -> None:
    store = await Store.open(db.target)
    try:
        j = job()
        await store.write(SubmitOp(j, None))
        assert await store.write(QuarantineOp(j.id, "test")) == 1
        row = await store.read.job(j.id)
        assert row is not None and row.job.state is JobState.FAILED and row.job.version == 1
    finally:
        await store.close()


async def test_a_write_of_many_rows_starts_without_the_commit_delay(db: Db) -> None:
    """A scheduling pass's transitions share their fsync already: they do not wait for company
    (the commit delay is for small writes that arrive together, as submissions do)."""
    store = await Store.open(db.target, commit_delay_s=1.0)
    try:
        jobs = [job() for _ in range(40)]
        await asyncio.gather(*(store.write(SubmitOp(j, None)) for j in jobs))  # a batch with company
        assert store.writer.stats.largest_batch > 1
        waits = tuple((j.id, tr.set_wait_reason("busy", 2.0)) for j in jobs)
        pass_write = asyncio.ensure_future(store.write(TransitionOp(waits)))
        await asyncio.sleep(0.5)
        assert pass_write.done() and len(pass_write.result()) == 40  # (it did not wait the 1 s)
        await asyncio.gather(*(store.write(SubmitOp(job(), None)) for _ in range(2)))
        small = asyncio.ensure_future(store.write(TransitionOp(waits[:1])))
        await asyncio.sleep(0.2)
        assert not small.done()  # one row: it waits the delay for others to join
        assert await small == []  # (that reason is set already)
    finally:
        await store.close()


def test_every_written_job_column_has_its_postgresql_type() -> None:
    """A column added to the jobs' UPDATEs needs its type for PostgreSQL's VALUES rows
    (master/store/dialect.py), and a key of the read for its SELECT list."""
    from master.store.dialect import PG_TYPES
    from master.store.rows import JOB_KEYS, JOB_UPDATE_COLUMNS

    assert set(JOB_UPDATE_COLUMNS) <= set(PG_TYPES)
    assert set(JOB_UPDATE_COLUMNS) <= set(JOB_KEYS)
