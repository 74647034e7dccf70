"""The worker plane's model types (horus_core.plane) and their wire forms (horus_core.wire)."""

from __future__ import annotations

import pytest

from horus_core import wire
from horus_core.client import GpuStats, JobGpuStats
from horus_core.errors import InvalidArgument
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import JobSpec, JobState
from horus_core.plane import (
    Assignment,
    AttemptLog,
    AttemptProgress,
    AttemptUpdate,
    GpuReading,
    Heartbeat,
    JobGpuReading,
    Kill,
    LeaseGrant,
)

READING = GpuReading("GPU-1", 55.5, 20.0, 3000, 16160, 61.0, 180.5, 2, (13, 79), False)
USE = JobGpuReading("j1", 2, "GPU-1", 40.0, 2500)


def test_one_readings_type_from_probe_to_sdk() -> None:
    assert GpuStats is GpuReading and JobGpuStats is JobGpuReading
    assert wire.gpu_reading_from_pb(wire.gpu_reading_to_pb(READING)) == READING
    assert wire.job_gpu_reading_from_pb(wire.job_gpu_reading_to_pb(USE)) == USE
    assert wire.gpu_reading_from_pb(pb.GpuStats(), uuid="GPU-9") == GpuReading("GPU-9", healthy=False)


def test_a_heartbeat_arrives_as_model_types() -> None:
    msg = wpb.Heartbeat(
        gpus=[wire.gpu_reading_to_pb(READING)],
        jobs=[wire.job_gpu_reading_to_pb(USE)],
        running=[wpb.AttemptRef(job_id="j1", attempt=2)],
        seq=7,
        fenced=True,
    )
    assert wire.heartbeat_from_pb(msg) == Heartbeat((READING,), (USE,), (("j1", 2),), 7, True)


def test_updates_logs_and_progress_arrive_as_model_types() -> None:
    done = wpb.AttemptUpdate(job_id="j1", attempt=1, state=pb.JOB_STATE_FAILED, exit_code=3, reason="x", at=5)
    assert wire.attempt_update_from_pb(done) == AttemptUpdate("j1", 1, JobState.FAILED, 3, "x", 5.0)
    running = wpb.AttemptUpdate(job_id="j1", attempt=1, state=pb.JOB_STATE_RUNNING)
    assert wire.attempt_update_from_pb(running).exit_code is None  # unset, not 0
    with pytest.raises(InvalidArgument, match="unknown job state"):
        wire.attempt_update_from_pb(wpb.AttemptUpdate(job_id="j1", attempt=1, state=99))  # type: ignore[arg-type]
    log = wpb.AttemptLog(job_id="j1", attempt=1, offset=10, data=b"hi")
    assert wire.attempt_log_from_pb(log) == AttemptLog("j1", 1, 10, b"hi")
    prog = wpb.AttemptProgress(job_id="j1", attempt=1, step=4, loss=0.5, samples_per_s=9.0, at=2.0)
    assert wire.attempt_progress_from_pb(prog) == AttemptProgress("j1", 1, 4, 0.5, 9.0, 2.0)


def test_what_the_master_sends_is_converted_at_the_edge() -> None:
    spec = JobSpec(("train",), gpus=2, job_type="t")
    assign = wire.to_worker_pb(Assignment("j1", 3, spec, ("GPU-1", "GPU-2")))
    assert assign.WhichOneof("msg") == "assign" and list(assign.assign.gpus) == ["GPU-1", "GPU-2"]
    assert wire.spec_from_pb(assign.assign.spec) == spec and assign.assign.attempt == 3
    kill = wire.to_worker_pb(Kill("j1", 3, "stale"))
    assert (kill.kill.job_id, kill.kill.attempt, kill.kill.reason) == ("j1", 3, "stale")
    grant = wire.to_worker_pb(LeaseGrant(2.0, 30.0, epoch=5, renews_seq=9, kill_grace_s=4.0)).registered
    assert (grant.heartbeat_interval_s, grant.lease_s, grant.epoch, grant.renews_seq, grant.kill_grace_s) == (
        2.0,
        30.0,
        5,
        9,
        4.0,
    )
