"""The pure parts of Horus on Slurm (horus_core.slurm): the pilot's batch script, squeue's JSON,
the GPUs a job was given and the adaptive pool's decision."""

from __future__ import annotations

import json

import pytest

from horus_core import wire
from horus_core.model import Node, SlurmTag
from horus_core.slurm import PilotSpec, PoolPilot, decide, job_gpus, parse_squeue, parse_time, render_script
from horus_core.slurm.env import job_id, parse_indices


def spec(**kw: object) -> PilotSpec:
    base: dict[str, object] = {
        "master": "10.0.0.1:50051",
        "gpus_per_node": 4,
        "worker": ("/opt/h/horus-worker",),
    }
    return PilotSpec(**(base | kw))  # type: ignore[arg-type]


def test_script_asks_for_one_node_its_gpus_and_the_warning() -> None:
    s = spec(
        time="2:00:00",
        partition="gpu",
        account="lab",
        gpu_type="a100",
        warn_s=120,
        stop_s=30,
        worker_args=("--fake-gpus", "4xA100"),
        output="/scratch/p-%j.out",
    )
    s.check()
    text = render_script(s)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for want in (
        "--nodes=1",
        "--gres=gpu:a100:4",
        "--signal=B:USR1@120",
        "--time=2:00:00",
        "--partition=gpu",
        "--account=lab",
        "--output=/scratch/p-%j.out",
        "--job-name=horus-pilot",
    ):
        assert f"#SBATCH {want}" in lines, (want, text)
    last = lines[-1]
    assert last.startswith(
        "exec /opt/h/horus-worker --slurm --master 10.0.0.1:50051 --slurm-warn-s 120 --slurm-stop-s 30"
    )
    assert last.endswith("--fake-gpus 4xA100")  # (after --state-dir: the user's flags win)
    assert "--gres=gpu:4" in render_script(spec())  # untyped GRES


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"gpus_per_node": 0}, "--gpus-per-node"),
        ({"partition": "bad name"}, "--partition"),
        ({"account": "a;b"}, "--account"),
        ({"warn_s": 30, "stop_s": 30}, "--stop-s"),
        ({"time": "5", "warn_s": 300}, "not longer than the warning"),
        ({"time": "1:xx"}, "--time"),
        ({"output": "/tmp/a b"}, "--output"),
        ({"master": ""}, "address"),
    ],
)
def test_bad_specs_are_refused_naming_the_flag(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        spec(**kw).check()


def test_slurm_times() -> None:
    assert parse_time("30") == 1800
    assert parse_time("5:30") == 330
    assert parse_time("1:02:03") == 3723
    assert parse_time("2-1") == 2 * 86400 + 3600
    assert parse_time("1-0:30") == 86400 + 1800
    assert parse_time("1-0:0:5") == 86405
    assert parse_time("UNLIMITED") is None
    with pytest.raises(ValueError):
        parse_time("soon")


def test_squeue_json_of_both_generations() -> None:
    old = {
        "jobs": [
            {
                "job_id": 12,
                "name": "horus-pilot",
                "job_state": "RUNNING",
                "end_time": 1700000600,
                "start_time": 1700000000,
                "nodes": "n1",
                "state_reason": "None",
                "partition": "gpu",
            }
        ]
    }
    new = {
        "jobs": [
            {
                "job_id": 13,
                "name": "horus-pilot",
                "job_state": ["PENDING"],
                "end_time": {"set": True, "infinite": False, "number": 0},
                "start_time": {"set": False, "number": 5},
                "nodes": "",
                "state_reason": "Resources",
            }
        ]
    }
    a, b = parse_squeue(json.dumps(old))[0], parse_squeue(json.dumps(new))[0]
    assert (a.job_id, a.state, a.end_time, a.nodes, a.active) == ("12", "RUNNING", 1700000600.0, "n1", True)
    assert a.left_s(1700000500.0) == 100.0
    assert (b.job_id, b.state, b.end_time, b.start_time, b.reason) == ("13", "PENDING", 0.0, 0.0, "Resources")
    assert b.left_s(0.0) is None
    with pytest.raises(ValueError, match="no JSON"):
        parse_squeue("squeue: error: bad")
    with pytest.raises(ValueError, match="'jobs'"):
        parse_squeue("[]")


def test_the_gpus_slurm_gave() -> None:
    assert job_gpus({"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"}) == (2, 3)
    assert job_gpus({"CUDA_VISIBLE_DEVICES": "1"}) == (1,)
    assert job_gpus({"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == ()  # (UUIDs: the probe's own list)
    assert job_gpus({}) == ()
    assert parse_indices("0,2-4") == (0, 2, 3, 4)
    with pytest.raises(ValueError, match="SLURM_JOB_GPUS"):
        job_gpus({"SLURM_JOB_GPUS": "x"})
    with pytest.raises(ValueError, match="twice"):
        parse_indices("1,1")
    assert job_id({"SLURM_JOB_ID": "42"}) == "42"
    with pytest.raises(ValueError, match="not inside a Slurm job"):
        job_id({})


def test_slurm_tag_on_the_wire() -> None:
    node = Node("slurm-7", (), slurm=SlurmTag("7", 1700000000.0))
    assert wire.node_from_pb(wire.node_to_pb(node)).slurm == SlurmTag("7", 1700000000.0)
    assert wire.node_from_pb(wire.node_to_pb(Node("plain", ()))).slurm is None


def pilot(
    job: str, registered: bool = True, busy: bool = False, idle_since: float | None = None
) -> PoolPilot:
    return PoolPilot(job, registered, 2, busy, idle_since if registered and not busy else None)


def size(pilots: list[PoolPilot], waiting: int, free: int, lo: int = 0, hi: int = 4, now: float = 100.0):  # type: ignore[no-untyped-def]
    return decide(
        pilots,
        waiting_gpus=waiting,
        free_gpus=free,
        gpus_per_node=2,
        min_pilots=lo,
        max_pilots=hi,
        grace_s=30.0,
        now=now,
    )


def test_adaptive_submits_for_the_shortfall_within_max() -> None:
    assert size([], waiting=3, free=0).submit == 2  # ceil(3 / 2)
    assert size([], waiting=20, free=0).submit == 4  # capped by --max
    assert size([pilot("1", busy=True)], waiting=20, free=0).submit == 3
    assert size([pilot("1", registered=False)], waiting=2, free=0).submit == 0  # one is on its way
    assert size([pilot("1", idle_since=99.0)], waiting=2, free=2).submit == 0  # it fits already
    assert size([], waiting=0, free=0, lo=2).submit == 2  # --min


def test_adaptive_counts_only_jobs_a_pilot_could_take() -> None:
    from horus_core.model import JobSpec
    from horus_core.slurm.sizing import wanted_gpus

    specs = [
        JobSpec(command=("x",), gpus=2),
        JobSpec(command=("x",), gpus=4),  # any shape: a gang over two pilots
        JobSpec(command=("x",), gpus=3, gpus_min=1, gpus_max=3),  # elastic: its least
        JobSpec(command=("x",), gpus=8, gpus_per_node=4, nodes=2),  # 4 per node: no pilot of 2 fits
    ]
    assert wanted_gpus(specs, gpus_per_node=2) == 2 + 4 + 1
    assert wanted_gpus(specs, gpus_per_node=4) == 2 + 4 + 1 + 8


def test_adaptive_releases_idle_pilots_after_the_grace_never_below_min() -> None:
    idle_long, idle_new, busy = (
        pilot("1", idle_since=10.0),
        pilot("2", idle_since=90.0),
        pilot("3", busy=True),
    )
    assert size([idle_long, idle_new, busy], waiting=0, free=4).release == ("1",)
    assert size([idle_long, idle_new, busy], waiting=0, free=4, now=200.0).release == ("1", "2")
    assert size([idle_long, idle_new, busy], waiting=0, free=4, lo=2, now=200.0).release == ("1",)
    assert size([idle_long], waiting=4, free=2, hi=1).release == ()  # jobs still wait: keep it
    queued = pilot("4", registered=False)
    assert size([queued], waiting=0, free=0).release == ("4",)  # nothing waits: no pilot needed
    assert size([queued], waiting=2, free=0).release == ()
