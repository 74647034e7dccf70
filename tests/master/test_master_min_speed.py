"""Speed floors in the live master (issue 10): the cluster default is filled in at submission,
and a running job whose measured speed stays below its floor gets its co-runner preempted.
A real grpc.aio server on 127.0.0.1:0, a real SQLite file, a fake worker and a fake clock."""

from __future__ import annotations

import logging
import pathlib

import pytest
from master_fakes import FakeWorker, client_for, config, spec

from horus_core.floor import READINGS
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.interference import default_model
from horus_core.testing import FakeClock
from master.app import Master
from master.config import MasterConfig
from master.main import config_from, parse_args

A = "ResNet-18 (batch size 32)"
B = "Recommendation (batch size 512)"  # the packaged table: A and B share a V100 at ~1.0x each


async def test_the_cluster_default_is_stored_with_jobs_that_name_no_floor(tmp_path: pathlib.Path) -> None:
    async with Master(config(tmp_path, min_speed=0.5), clock=FakeClock()) as m, client_for(m) as stub:
        plain = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))).job
        own = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(min_speed=0.9)))).job
        assert plain.spec.min_speed == 0.5 and own.spec.min_speed == 0.9
        got = await stub.GetJob(cpb.GetJobRequest(job_id=plain.id))
        assert got.spec.min_speed == 0.5


def test_the_master_flag_and_config_check_the_default(tmp_path: pathlib.Path) -> None:
    args = parse_args(["--db", str(tmp_path / "h.db"), "--min-speed", "0.5"])
    assert config_from(args).min_speed == 0.5
    with pytest.raises(SystemExit):
        parse_args(["--db", str(tmp_path / "h.db"), "--min-speed", "1.5"])
    with pytest.raises(ValueError, match="min_speed"):
        MasterConfig(db_path=tmp_path / "h.db", min_speed=-0.1)


async def test_the_round_flag_sets_the_gavel_policies_round(tmp_path: pathlib.Path) -> None:
    args = parse_args(["--db", str(tmp_path / "h.db"), "--policy", "gavel-las-perf", "--round-s", "90"])
    async with Master(config_from(args), clock=FakeClock()) as m:
        assert m.scheduler.policy.round_s == 90.0  # type: ignore[attr-defined]
    for bad in ("0", "-5", "nan"):
        with pytest.raises(SystemExit):
            parse_args(["--db", str(tmp_path / "h.db"), "--round-s", bad])
    with pytest.raises(ValueError, match="round_s"):
        MasterConfig(db_path=tmp_path / "h.db", round_s=0.0)


async def test_a_job_slowed_below_its_floor_gets_its_co_runner_preempted(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="master.services.floor")
    clock = FakeClock()
    cfg = config(tmp_path, policy="horus", heartbeat_s=0.5)
    async with Master(cfg, clock=clock, interference=default_model()) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=1)
        await w.connect()
        gpu = w.gpus[0].uuid

        async def beat(*attempts: tuple[str, int]) -> None:
            await w.beat_jobs(gpu, *attempts)
            clock.advance(1.0)

        async def pass_time(seconds: float, *attempts: tuple[str, int]) -> None:
            for _ in range(int(seconds // 10)):  # heartbeats keep the node READY meanwhile
                clock.advance(9.0)
                await beat(*attempts)

        async def report(job_id: str, steps: range, rate: float) -> None:
            for s in steps:
                await w.send(
                    progress=wpb.AttemptProgress(job_id=job_id, attempt=1, step=s, samples_per_s=rate)
                )
            await w.barrier()

        async def solo_known() -> bool:
            resp = await stub.ListProfiles(cpb.ListProfilesRequest())
            return any(p.job_type == A and p.solo_samples_per_s for p in resp.profiles)

        a = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=A, min_speed=0.5)))).job
        await w.recv_kind("assign")
        await w.update(a.id, 1, pb.JOB_STATE_RUNNING)
        await beat((a.id, 1))
        await beat((a.id, 1))
        await report(a.id, range(1, 5), 400.0)  # alone: its solo speed
        for _ in range(3):  # the learner's next checkpoint (every 60 s) stores the solo throughput
            await pass_time(60.0, (a.id, 1))
            await m.scheduler.run_once()
            if await solo_known():
                break
        assert await solo_known()
        b = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=B)))).job
        assign_b = await w.recv_kind("assign")
        assert list(assign_b.gpus) == [gpu]  # predicted to share well
        await w.update(b.id, 1, pb.JOB_STATE_RUNNING)
        await beat((a.id, 1), (b.id, 1))
        step = 5
        for i in range(READINGS + 1):  # 0.25x of solo, a reading every 30 s: >= 3 over >= 60 s
            await report(a.id, range(step, step + 2), 100.0)
            step += 2
            if i < READINGS:
                assert (await stub.GetJob(cpb.GetJobRequest(job_id=b.id))).state == pb.JOB_STATE_RUNNING
            await m.scheduler.run_once()
            await pass_time(30.0, (a.id, 1), (b.id, 1))
        kills = [msg.kill.job_id for msg in w.skipped if msg.WhichOneof("msg") == "kill"]
        while b.id not in kills:  # (the Kill may still be on its way: recv fails after WAIT_S)
            msg = await w.recv()
            if msg.WhichOneof("msg") == "kill":
                kills.append(msg.kill.job_id)
        assert set(kills) == {b.id}
        moved = await stub.GetJob(cpb.GetJobRequest(job_id=b.id))
        assert moved.state == pb.JOB_STATE_PENDING  # re-queued (its reason: the move, or a later pass's wait)
        said = [r.getMessage() for r in caplog.records if r.name == "master.services.floor"]
        assert len(said) == 1 and b.id in said[0] and a.id in said[0] and "speed floor 0.5x" in said[0]
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=a.id))).state == pb.JOB_STATE_RUNNING
        await w.close()


async def test_the_floor_enforcer_gets_the_masters_minimum_run_time(tmp_path: pathlib.Path) -> None:
    async with Master(config(tmp_path, min_run_s=45.0, min_speed=0.5), clock=FakeClock()) as m:
        assert m.scheduler.floor.min_run_s == 45.0  # (horus_core.floor.decide_moves honours it)
