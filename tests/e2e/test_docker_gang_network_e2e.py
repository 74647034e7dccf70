"""A multi-node gang in containers on a named (user-defined) network: two workers with --runtime
docker and --docker-gang-network NET on one engine, a 4-GPU job as 2 x 2. The rank-0 container
joins NET under the attempt's alias, every part's MASTER_ADDR is that alias, and rank 1 reaches
rank 0 at MASTER_ADDR:MASTER_PORT through Docker's embedded DNS. The test creates the bridge
network and removes it after. Skipped without an engine (scripts/docker-test-setup.sh)."""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import Iterator

import aiodocker
import pytest
from aiodocker.exceptions import DockerError

from horus_core import SyncHorusClient
from horus_core.gang import rendezvous_alias
from horus_core.model import JobSpec, JobState
from tests.docker_engine import IMAGE, require_engine
from tests.e2e.cluster import LocalCluster
from tests.e2e.test_docker_gang_e2e import meeting_part

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]

# each part prints what it was told; rank 0 listens on MASTER_PORT, rank 1 sends to MASTER_ADDR
PART = meeting_part(
    "NODE_RANK=$NODE_RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR PET_MASTER_ADDR=$PET_MASTER_ADDR",
    100,
)


async def _network(name: str, create: bool) -> None:
    docker = aiodocker.Docker()
    try:
        if create:
            await docker.networks.create({"Name": name, "Driver": "bridge", "CheckDuplicate": True})
        else:
            await (await docker.networks.get(name)).delete()
    finally:
        await docker.close()


@pytest.fixture
def gang_network() -> Iterator[str]:
    require_engine()
    name = f"horus-test-{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_network(name, create=True))
    except DockerError as err:  # e.g. an engine without bridge support
        pytest.skip(f"cannot create a bridge network: {err}")
    yield name
    asyncio.run(_network(name, create=False))


@pytest.fixture
def gang_cluster(tmp_path: pathlib.Path, gang_network: str) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path)
    try:
        c.start_master()
        for name in ("dnet1", "dnet2"):
            c.start_worker(name, "2", "--runtime", "docker", "--docker-gang-network", gang_network)
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()  # the workers remove their containers, so the network can go


def test_a_gang_on_a_named_network_meets_at_the_rank0_alias(gang_cluster: LocalCluster) -> None:
    with SyncHorusClient.connect(gang_cluster.addr) as client:
        job = client.submit(JobSpec(command=("sh", "-c", PART), gpus=4, gpus_per_node=2, image=IMAGE))
        done = client.wait(job.id, timeout=120)
        assert done.state is JobState.SUCCEEDED, (done.reason, gang_cluster.logs())
    alias = rendezvous_alias(job.id, done.attempt)
    text = gang_cluster.job_logs_with(job.id, f"[{done.nodes[0]}] hello from rank 1")
    assert len(done.nodes) == 2, done.nodes
    for rank, node in enumerate(done.nodes):
        told = f"[{node}] NODE_RANK={rank} WORLD_SIZE=4 MASTER_ADDR={alias} PET_MASTER_ADDR={alias}"
        assert told in text, text
    assert f"[{done.nodes[0]}] hello from rank 1" in text, text  # rank 1 found rank 0 by its alias
