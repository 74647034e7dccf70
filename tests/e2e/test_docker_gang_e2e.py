"""A multi-node gang in containers: two workers with --runtime docker on one engine, a 4-GPU job
across both; each part's container gets the rendezvous env and joins the gang network (host by
default), so rank 1 reaches rank 0 at MASTER_ADDR:MASTER_PORT. Skipped without an engine."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.docker_engine import IMAGE, require_engine
from tests.e2e.cluster import LocalCluster

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]


def meeting_part(shown: str, tries: int) -> str:
    """A gang part's shell script: it prints ``shown`` (its env, expanded), then rank 0 listens
    on MASTER_PORT and rank 1 sends its greeting to MASTER_ADDR:MASTER_PORT (``tries`` times,
    0.2 s apart, until one gets through)."""
    return (
        f'echo "{shown}"; '
        'if [ "$NODE_RANK" = 0 ]; then nc -l -p "$MASTER_PORT"; else '
        f'for i in $(seq {tries}); do echo "hello from rank $NODE_RANK" '
        '| nc -w 2 "$MASTER_ADDR" "$MASTER_PORT" && exit 0; sleep 0.2; done; exit 1; fi'
    )


PART = meeting_part(
    "NODE_RANK=$NODE_RANK NNODES=$NNODES WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE"
    " PET_NPROC_PER_NODE=$PET_NPROC_PER_NODE",
    50,
)


@pytest.fixture
def gang_cluster(tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    require_engine()
    c = LocalCluster(tmp_path)
    try:
        c.start_master()
        c.start_worker("dgang1", "2", "--runtime", "docker")
        c.start_worker("dgang2", "2", "--runtime", "docker")
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()


def test_a_gang_of_containers_meets_at_its_rendezvous(gang_cluster: LocalCluster) -> None:
    with SyncHorusClient.connect(gang_cluster.addr) as client:
        job = client.submit(JobSpec(command=("sh", "-c", PART), gpus=4, gpus_per_node=2, image=IMAGE))
        done = client.wait(job.id, timeout=120)
        assert done.state is JobState.SUCCEEDED, (done.reason, gang_cluster.logs())
        assert len(done.nodes) == 2
    rank0, rank1 = done.nodes
    text = gang_cluster.job_logs_with(job.id, f"[{rank0}] hello from rank 1")
    assert f"[{rank0}] NODE_RANK=0 NNODES=2 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 PET_NPROC_PER_NODE=2" in text, (
        text
    )
    assert f"[{rank1}] NODE_RANK=1 NNODES=2 WORLD_SIZE=4" in text, text
    assert f"[{rank0}] hello from rank 1" in text, text  # rank 0 heard rank 1 across containers
