"""Progress in the live master: reports kept per job (bounded), answered by GetJobProgress with
the fitted estimate, handed to the optimus policy between passes, and kept across a restart;
the attained service of ``horus``'s order rebuilt from the store after a restart; the optimus
re-plan interval from the flag or the environment."""

from __future__ import annotations

import pathlib

import grpc
import pytest
from master_fakes import FakeWorker, bearer, client_for, config, running_master, spec, token_file

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.policies.attained import Attained
from horus_core.policies.optimus import OptimusPolicy
from horus_core.policies.optimus.journal import ProgressPoint
from horus_core.policies.pack import PackingPolicy
from horus_core.sim.elastic import synthetic_curve
from horus_core.testing import FakeClock
from master.main import REPLAN_ENV, config_from, parse_args
from master.services.progress import SAVE_EVERY_S, ProgressKeeper, stored_points
from master.store import Store
from master.store.progress import load_progress
from tests.pgtest import Db

CURVE = synthetic_curve(100_000, 4.0, 0.5)


async def start_elastic(m: object, stub: object, w: FakeWorker, total_steps: int = 0) -> tuple[str, int]:
    req = cpb.SubmitJobRequest(spec=spec(gpus=1, gpus_min=1, gpus_max=2, total_steps=total_steps))
    jid = (await stub.SubmitJob(req)).job.id  # type: ignore[attr-defined]
    a = await w.recv_kind("assign")
    assert (a.spec.gpus_min, a.spec.gpus_max) == (1, 2)
    await w.update(jid, a.attempt, pb.JOB_STATE_RUNNING)
    return jid, a.attempt


async def report(w: FakeWorker, jid: str, attempt: int, steps: range, t0: float = 1_700_000_000.0) -> None:
    for k in steps:
        p = wpb.AttemptProgress(
            job_id=jid, attempt=attempt, step=k, loss=CURVE.loss(k), samples_per_s=100.0, at=t0 + k / 10
        )
        await w.send(progress=p)
    await w.barrier()


async def test_reports_are_kept_estimated_fed_to_optimus_and_survive_a_restart(
    tmp_path: pathlib.Path,
) -> None:
    clock = FakeClock()
    steps = range(0, 40_000, 1_000)
    async with running_master(tmp_path, clock, policy="optimus") as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        await w.connect()
        jid, attempt = await start_elastic(m, stub, w)
        await report(w, jid, attempt, steps)
        got = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid, history=5))
        assert got.points == len(steps) and got.latest.step == steps[-1] and got.latest.attempt == attempt
        assert [p.step for p in got.history] == list(steps[-5:])
        assert got.estimate_from == "loss curve" and got.HasField("steps_left") and got.steps_left > 0
        assert got.seconds_left == pytest.approx(got.steps_left / 10.0, rel=1e-6)  # 10 steps/s reported
        assert got.target_step == pytest.approx(got.latest.step + got.steps_left)
        policy = m.policy
        assert isinstance(policy, OptimusPolicy)
        await m.scheduler.run_once()
        history = policy.history.get(jid)
        assert history is not None and history.last_step == steps[-1] and len(history.steps) == len(steps)
        await w.crash()
    async with running_master(tmp_path, FakeClock(), policy="optimus") as m, client_for(m) as stub:
        again = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid, history=5))
        assert again.points == len(steps) and list(again.history) == list(got.history)
        assert again.steps_left == pytest.approx(got.steps_left)
        await m.scheduler.run_once()
        assert isinstance(m.policy, OptimusPolicy)
        restored = m.policy.history.get(jid)
        assert restored is not None and restored.last_step == steps[-1]


async def test_progress_of_others_jobs_and_bad_requests(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, FakeClock(), policy="optimus") as m, client_for(m) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id="j-nope"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(total_steps=500)))).job.id
        empty = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid))
        assert not empty.HasField("latest") and empty.points == 0
        assert empty.steps_left == 500 and not empty.HasField("seconds_left")  # no rate measured yet
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid, history=10_000))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "history" in (
            err.value.details() or ""
        )


async def test_reports_of_an_attempt_the_worker_does_not_own_are_ignored(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, FakeClock(), policy="optimus") as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        other = FakeWorker(m.port, "node-b", n_gpus=2)
        await w.connect()
        jid, attempt = await start_elastic(m, stub, w, total_steps=10_000)
        await other.connect()
        await report(other, jid, attempt, range(0, 10))
        got = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid))
        assert got.points == 0
        await report(w, jid, attempt, range(0, 100, 10))
        got = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid))
        assert got.points == 10 and got.estimate_from == "total_steps" and got.steps_left == 10_000 - 90
        await w.close()
        await other.close()


async def test_attained_service_is_rebuilt_from_the_store_after_a_restart(
    tmp_path: pathlib.Path, db: Db
) -> None:
    clock = FakeClock()
    url = db.target if db.pg else ""  # (on both backends: the spans' SQL differs)
    async with running_master(tmp_path, clock, policy="horus", db_url=url) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2)))).job.id
        short = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=1)))).job.id
        a = await w.recv_kind("assign")
        assert a.job_id == jid
        await w.update(jid, a.attempt, pb.JOB_STATE_RUNNING)
        await w.barrier()
        started = clock.now()
        clock.advance(1800)
        await w.crash()
    later = FakeClock(started + 3600)
    async with running_master(tmp_path, later, policy="horus", db_url=url) as m:
        las = getattr(m.policy, "las", None)
        assert isinstance(las, Attained) and isinstance(m.policy, PackingPolicy)
        # Still running as far as the store knows: 2 GPUs from its start until now.
        assert las.service[jid] == pytest.approx(2 * 3600)
        assert las.service.get(short, 0.0) == 0.0 and las.level(jid) > las.level(short)
        book = m.policy.book  # its running stint as of its start (kept to the first pass)
        stint = book.stints.get(jid)
        seen = (stint.job.attempt, stint.running) if stint is not None else book._restored[jid]
        assert seen == (a.attempt, pytest.approx(started))


async def test_the_keeper_saves_on_its_interval_and_drops_finished_jobs_once_saved(db: Db) -> None:
    store = await Store.open(db.target)
    try:
        clock = FakeClock()
        keeper = ProgressKeeper(store, clock, cap=8)
        for k in range(20):
            keeper.record("j1", ProgressPoint(1, k, CURVE.loss(k), 10.0, float(k)))
        keeper.record("j1", ProgressPoint(1, 21, float("inf"), 10.0, 21.0))  # refused: not finite
        assert await keeper.save() > 0
        keeper.record("j1", ProgressPoint(1, 22, 0.6, 10.0, 22.0))
        assert await keeper.save() == 0  # within the interval
        keeper.prune(lambda job_id: False)  # j1 finished: kept in memory until its last save
        assert "j1" in keeper.journals
        clock.advance(SAVE_EVERY_S)
        assert await keeper.save() > 0 and "j1" not in keeper.journals
        stored = await keeper.journal("j1")  # from the store now
        assert stored.latest is not None and stored.latest.step == 22 and len(stored.points) < 8
        assert len(keeper.take_observations()) == 21 and keeper.take_observations() == []
        # Saved as it grows (appends) and as it thins itself (rewrites): the store always
        # holds the journal's points and its latest report.
        for k in range(40):
            keeper.record("j2", ProgressPoint(1, k, CURVE.loss(k), 10.0, float(k)))
            clock.advance(SAVE_EVERY_S if k % 3 == 0 else 0.0)
            await keeper.save()
            if k % 3 == 0:
                assert await load_progress(store.read, "j2") == list(stored_points(keeper.journals["j2"]))
        assert keeper.journals["j2"].thinned >= 2
    finally:
        await store.close()


async def test_users_read_only_their_own_jobs_progress(tmp_path: pathlib.Path) -> None:
    path = token_file(tmp_path, "tok-alice alice", "tok-bob bob")
    alice, bob = bearer("tok-alice"), bearer("tok-bob")
    async with running_master(tmp_path, auth_tokens=path, join_token="jt") as m, client_for(m) as stub:
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(total_steps=9)), metadata=alice)).job.id
        mine = await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid), metadata=alice)
        assert mine.job_id == jid and mine.steps_left == 9
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetJobProgress(cpb.GetJobProgressRequest(job_id=jid), metadata=bob)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED  # as GetJob answers


def test_the_optimus_replan_interval_comes_from_the_flag_or_the_environment(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = ["--db", str(tmp_path / "h.db")]
    monkeypatch.delenv(REPLAN_ENV, raising=False)
    assert config_from(parse_args(db)).optimus_replan_s is None
    assert config_from(parse_args([*db, "--optimus-replan-s", "5"])).optimus_replan_s == 5.0
    monkeypatch.setenv(REPLAN_ENV, "7")
    assert config_from(parse_args(db)).optimus_replan_s == 7.0
    with pytest.raises(SystemExit):
        parse_args([*db, "--optimus-replan-s", "-1"])
    monkeypatch.setenv(REPLAN_ENV, "soon")
    with pytest.raises(SystemExit, match=REPLAN_ENV):
        parse_args(db)


async def test_the_master_gives_optimus_its_configured_interval(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, FakeClock(), policy="optimus", optimus_replan_s=2.5) as m:
        assert isinstance(m.policy, OptimusPolicy) and m.policy.replan_s == 2.5
    with pytest.raises(ValueError, match="optimus_replan_s"):
        config(tmp_path, optimus_replan_s=float("nan"))


@pytest.mark.parametrize("name", ["horus", "horus+"])
async def test_the_master_hands_progress_to_horus_for_its_remaining_work_order(
    tmp_path: pathlib.Path, name: str
) -> None:
    async with running_master(tmp_path, FakeClock(), policy=name) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        await w.connect()
        req = cpb.SubmitJobRequest(spec=spec(gpus=1, total_steps=100_000))
        jid = (await stub.SubmitJob(req)).job.id
        a = await w.recv_kind("assign")
        await w.update(jid, a.attempt, pb.JOB_STATE_RUNNING)
        steps = range(0, 40_000, 1_000)
        await report(w, jid, a.attempt, steps)  # 10 steps/s
        await m.scheduler.run_once()
        las = getattr(m.policy, "las", None)
        assert isinstance(las, Attained) and las.work is not None
        track = las.work.tracks[jid]
        assert track.last is not None and track.last[0] == steps[-1]
        assert len(track.history.steps) == len(steps)  # every report's loss reached the policy
        # Confident (total_steps given, a steady measured speed): (100,000 - 39,000) / 10 x 1 GPU.
        assert las.left[jid] == pytest.approx(6_100.0)
