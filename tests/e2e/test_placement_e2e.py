"""Live interference-aware placement: a real master with --policy horus and a simulated worker.

Job types come from Gavel's measured pair table: two ResNet-18 (batch 32) jobs each keep ~100 %
of their solo speed when they share a V100, so Horus co-locates them; two Recommendation
(batch 512) jobs drop to ~0.17x each when paired, so Horus keeps them apart even though they fit
in memory, and the second one waits with a reason.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(180)
COMPATIBLE = "ResNet-18 (batch size 32)"
INCOMPATIBLE = "Recommendation (batch size 512)"


def spec(job_type: str, seconds: float, name: str) -> JobSpec:
    cmd = workload_cmd(seconds, extra=("--job-type", job_type))
    return JobSpec(command=tuple(cmd), gpus=1, job_type=job_type, name=name)


@pytest.fixture
def horus_cluster(tmp_path: pathlib.Path) -> Any:
    c = LocalCluster(tmp_path, policy="horus")
    try:
        c.start_master()
        c.start_worker("solo-gpu", gpus="1xV100")
        c.wait_nodes(1)
        yield c
    finally:
        c.stop()


def test_horus_colocates_a_compatible_pair(horus_cluster: LocalCluster) -> None:
    c = horus_cluster
    with SyncHorusClient.connect(c.addr) as client:
        a = client.submit(spec(COMPATIBLE, 6.0, "r18-a"))
        b = client.submit(spec(COMPATIBLE, 6.0, "r18-b"))
        gpus = until(lambda: [g for g in c.hctl_json("gpus") if len(g["job_ids"]) == 2])
        assert set(gpus[0]["job_ids"]) == {a.id, b.id}
        placed = [client.get(j.id) for j in (a, b)]
        assert all(j.state.active for j in placed) and placed[0].gpus == placed[1].gpus
        assert all(j.predicted_slowdown >= 0.9 for j in placed), [j.predicted_slowdown for j in placed]
        assert all(client.wait(j.id, timeout=60).state is JobState.SUCCEEDED for j in (a, b))


def test_horus_keeps_an_incompatible_pair_apart(horus_cluster: LocalCluster) -> None:
    c = horus_cluster
    with SyncHorusClient.connect(c.addr) as client:
        a = client.submit(spec(INCOMPATIBLE, 4.0, "rec-a"))
        b = client.submit(spec(INCOMPATIBLE, 4.0, "rec-b"))
        first = until(lambda: next((j for j in (client.get(a.id), client.get(b.id)) if j.state.active), None))
        other = b if first.id == a.id else a
        # (a pass may assign the first before the second arrives: wait for the pass that saw both)
        waiting = until(
            lambda: (
                (j := client.get(other.id)).state is JobState.PENDING
                and j.reason not in ("", "waiting for a scheduling pass")
                and j
            )
        )
        assert "slow" in waiting.reason or "speed" in waiting.reason, waiting.reason
        # While the first runs, it has the GPU to itself: the pair never shares it.
        while client.get(first.id).state.active:
            assert all(len(g["job_ids"]) <= 1 for g in c.hctl_json("gpus"))
            time.sleep(0.3)
        done = [client.wait(j.id, timeout=60) for j in (a, b)]
        assert all(j.state is JobState.SUCCEEDED for j in done)
        assert done[0].started_at is not None and done[1].started_at is not None
