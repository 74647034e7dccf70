"""Live heterogeneous cluster: a K80 worker and a V100 worker under ``--policy horus``.

A ResNet-18 job runs about 3x faster on a V100 than on a K80 (Gavel's measured solo
throughputs), so heterogeneity-aware horus puts it on the V100 node although the K80s are free
too; a job submitted with ``hctl submit --gpu-type k80`` lands on the K80 node, and ``hctl job``
shows the types it accepts.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from horus_core.interference import default_model
from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(180)
R18 = "ResNet-18 (batch size 16)"


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, policy="horus")
    try:
        c.start_master()
        c.start_worker("kay", gpus="4xK80")
        c.start_worker("vee", gpus="4xV100")
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()


def submit(c: LocalCluster, *flags: str) -> str:
    cmd = workload_cmd(8.0, extra=("--job-type", R18))
    return c.hctl("submit", "--gpus", "1", "--type", R18, *flags, "--", *cmd).stdout.strip()


def placed_on(c: LocalCluster, job_id: str) -> str:
    return str(until(lambda: c.hctl_json("job", job_id)["node"]))


def test_fast_type_for_a_free_job_and_the_named_type_for_a_typed_one(cluster: LocalCluster) -> None:
    model = default_model()
    k80, v100 = (model.solo_throughput(R18, 1, t) or 0.0 for t in ("k80", "v100"))
    assert v100 > 2 * k80  # the premise: much faster on the V100
    fast = submit(cluster)
    assert placed_on(cluster, fast) == "vee", cluster.logs()
    typed = submit(cluster, "--gpu-type", "K80")
    assert placed_on(cluster, typed) == "kay", cluster.logs()
    record = cluster.hctl_json("job", typed)
    assert record["gpu_types"] == ["k80"]
    assert "GPU types" in cluster.hctl("job", typed).stdout
    nowhere = submit(cluster, "--gpu-type", "a100")
    reason = until(lambda: cluster.hctl_json("job", nowhere)["reason"])
    assert reason == "no GPU of type a100 in the cluster"
