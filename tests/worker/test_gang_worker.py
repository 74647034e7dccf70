"""A worker's part of a multi-node gang: the Assignment's gang fields become the rendezvous env of
the attempt, and a gang part's container joins the gang network."""

from __future__ import annotations

import pathlib

import pytest

from horus_core.gen import worker_pb2 as wpb
from horus_core.model import JobSpec
from horus_core.plane import Assignment
from worker import messages
from worker.main import parse_args
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker_config import ContainerPolicy, create_body
from worker.state import Start, WorkerState


class _Clock:
    def monotonic(self) -> float:
        return 100.0

    def time(self) -> float:
        return 1_700_000_000.0


def _assignment(nnodes: int) -> Assignment:
    """As the worker reads it off the stream (``messages.from_master``)."""
    msg = wpb.Assignment(
        job_id="j",
        attempt=1,
        gpus=["g0", "g1"],
        node_rank=1,
        nnodes=nnodes,
        world_size=4,
        master_addr="10.1.2.3",
        master_port=29511,
    )
    got = messages.from_master(wpb.MasterMessage(assign=msg))
    assert isinstance(got, Assignment)
    return got


def test_a_gang_part_gets_the_rendezvous_env_and_a_single_node_job_none() -> None:
    env = dict(messages.gang_env(_assignment(2)))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["NODE_RANK"], env["NNODES"]) == (
        "10.1.2.3",
        "29511",
        "1",
        "2",
    )
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["PET_NPROC_PER_NODE"]) == ("4", "2", "2")
    assert messages.gang_env(_assignment(1)) == () and messages.gang_env(_assignment(0)) == ()


def test_the_state_machine_hands_the_env_to_the_start() -> None:
    state = WorkerState(["g0", "g1"], _Clock())
    env = messages.gang_env(_assignment(2))
    effects = state.on_assignment(AttemptKey("j", 1), JobSpec(("x",)), ("g0", "g1"), env)
    assert effects == [Start(AttemptKey("j", 1), JobSpec(("x",)), ("g0", "g1"), env)]


def _request(env: tuple[tuple[str, str], ...]) -> LaunchRequest:
    spec = JobSpec(("python", "train.py"), image="img:1")
    return LaunchRequest(AttemptKey("j", 1), spec, ("g0",), pathlib.Path("/logs/j/1.log"), env)


def test_a_gang_part_container_joins_the_gang_network_others_the_default() -> None:
    policy = ContainerPolicy("w1", network="jobs")
    gang = create_body(_request(messages.gang_env(_assignment(2))), policy, [])
    assert gang["HostConfig"]["NetworkMode"] == "host"
    assert "MASTER_ADDR=10.1.2.3" in gang["Env"] and "NODE_RANK=1" in gang["Env"]
    assert create_body(_request(()), policy, [])["HostConfig"]["NetworkMode"] == "jobs"
    named = ContainerPolicy("w1", gang_network="overlay-1")
    assert (
        create_body(_request(messages.gang_env(_assignment(2))), named, [])["HostConfig"]["NetworkMode"]
        == "overlay-1"
    )


def test_a_gang_network_may_not_be_another_container() -> None:
    with pytest.raises(ValueError, match="container"):
        ContainerPolicy("w1", gang_network="container:x")


def test_the_advertised_address_is_checked_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--master", "127.0.0.1:1", "--name", "w1", "--fake-gpus", "2"]
    assert parse_args([*base, "--advertise-addr", "10.0.0.7"]).advertise_addr == "10.0.0.7"
    assert parse_args(base).advertise_addr == ""  # the master uses the address it sees
    with pytest.raises(SystemExit):
        parse_args([*base, "--advertise-addr", "no spaces please"])
    assert "--advertise-addr must be a host name or address" in capsys.readouterr().err
