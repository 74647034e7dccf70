"""A gang network the engine does not have, against a real Docker Engine: the part's start fails
with an error that names the network and the worker option, leaves no container behind, and the
runtime keeps running other jobs. Skipped without an engine (scripts/docker-test-setup.sh)."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import AsyncIterator

import pytest

from horus_core.errors import FailedPrecondition
from horus_core.gang import GangInfo
from horus_core.model import JobSpec, JobState
from tests.worker.test_docker_runtime import IMAGE, _engine  # noqa: F401 (the skip-without-engine fixture)
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker import DockerRuntime

pytestmark = pytest.mark.docker
MISSING = f"horus-missing-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def runtime() -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(f"test-{uuid.uuid4().hex[:10]}", gang_network=MISSING, orphan_grace_s=0)
    yield rt
    await rt.remove_orphans(set())
    await rt.close()


def _request(tmp: pathlib.Path, job: str, command: tuple[str, ...], rank: int | None) -> LaunchRequest:
    env = GangInfo(rank, 2, 2, "10.0.0.1", 29501).env(1) if rank is not None else ()
    spec = JobSpec(command, image=IMAGE)
    return LaunchRequest(AttemptKey(job, 1), spec, (), tmp / job / "1.log", env)


@pytest.mark.parametrize("rank", [0, 1])
async def test_a_missing_gang_network_fails_the_part_clearly_and_leaves_nothing(
    runtime: DockerRuntime, tmp_path: pathlib.Path, rank: int
) -> None:
    with pytest.raises(FailedPrecondition) as caught:
        await runtime.start(_request(tmp_path, "gang", ("true",), rank))
    message = str(caught.value)
    assert MISSING in message and "--docker-gang-network" in message and "does not exist" in message
    assert await runtime.remove_orphans(set()) == []  # no container was left behind
    solo = await runtime.start(_request(tmp_path, "solo", ("echo", "still here"), None))
    assert (await solo.wait()).state is JobState.SUCCEEDED  # a job on one node runs as before


async def test_a_gang_network_where_parts_cannot_meet_is_refused_before_connecting() -> None:
    with pytest.raises(ValueError, match="cannot resolve"):
        await DockerRuntime.open("w", url="unix:///nonexistent.sock", gang_network="none")
