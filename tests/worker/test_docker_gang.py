"""A gang part's container on a named network: rank 0 gets the attempt's alias, every part's
MASTER_ADDR names it; host networking and single-node jobs keep what they had
(worker.runtime.docker_gang through the create body)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from horus_core.gang import GangInfo
from horus_core.model import JobSpec
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker_config import ContainerPolicy, create_body

ALIAS = "horus-0a1b2c3d4e5f-a2-r0"


def _request(rank: int, nnodes: int = 2, attempt: int = 2) -> LaunchRequest:
    env = GangInfo(rank, nnodes, 4, "10.1.2.3", 29511).env(2) if nnodes else ()
    spec = JobSpec(("python", "train.py"), image="img:1")
    key = AttemptKey("0a1b2c3d4e5f", attempt)
    return LaunchRequest(key, spec, ("g0", "g1"), pathlib.Path("/logs/j/2.log"), env)


def _env(body: dict[str, Any]) -> dict[str, str]:
    return dict(e.split("=", 1) for e in body["Env"])


@pytest.mark.parametrize("rank", [0, 1])
def test_on_a_named_network_every_part_meets_at_the_rank0_alias(rank: int) -> None:
    body = create_body(_request(rank), ContainerPolicy("w1", gang_network="horus-gangs"), [])
    env = _env(body)
    assert body["HostConfig"]["NetworkMode"] == "horus-gangs"
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == ALIAS
    assert (env["MASTER_PORT"], env["NODE_RANK"]) == ("29511", str(rank))  # the rest as the master said


def test_only_rank0_joins_under_the_alias() -> None:
    policy = ContainerPolicy("w1", gang_network="horus-gangs")
    rank0 = create_body(_request(0), policy, [])
    assert rank0["NetworkingConfig"] == {"EndpointsConfig": {"horus-gangs": {"Aliases": [ALIAS]}}}
    assert "NetworkingConfig" not in create_body(_request(1), policy, [])


def test_a_new_attempt_gets_a_new_alias() -> None:
    policy = ContainerPolicy("w1", gang_network="horus-gangs")
    second = _env(create_body(_request(1, attempt=3), policy, []))["MASTER_ADDR"]
    assert second == "horus-0a1b2c3d4e5f-a3-r0" != ALIAS


@pytest.mark.parametrize("rank", [0, 1])
def test_on_host_networking_the_master_address_stays(rank: int) -> None:
    body = create_body(_request(rank), ContainerPolicy("w1"), [])
    env = _env(body)
    assert body["HostConfig"]["NetworkMode"] == "host"
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "10.1.2.3"
    assert "NetworkingConfig" not in body


def test_a_job_on_one_node_gets_no_alias_and_keeps_its_network() -> None:
    body = create_body(_request(0, nnodes=0), ContainerPolicy("w1", network="jobs", gang_network="gangs"), [])
    assert body["HostConfig"]["NetworkMode"] == "jobs"
    assert "MASTER_ADDR" not in _env(body) and "NetworkingConfig" not in body


@pytest.mark.parametrize("name", ["none", "bridge", "default", "", "container:abc"])
def test_a_gang_network_where_parts_cannot_meet_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="gang network"):
        ContainerPolicy("w1", gang_network=name)
