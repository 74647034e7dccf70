"""A job a pass placed in a view of its snapshot (a gang started on its reservation, the jobs an
earlier GPU-type tier assigned) is a job state the store never gave: each such view has a
version of its own, so the packer's per-version caches never hand one view's GPUs to another
(found by tests/master/test_live_changes.py: the cached path placed jobs beside GPUs a
gang held only in an earlier pass's view, where the plain oracle did not)."""

from __future__ import annotations

import numpy as np

from horus_core.model import Gpu, Job, JobSpec, JobState, Node
from horus_core.packing.cluster import NodeCache
from horus_core.packing.placed import PlacedGpus
from horus_core.policies.views import placed_view

NODES = tuple(
    Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100", 16160, "v100") for k in range(4)))
    for i in range(2)
)


def test_each_view_of_a_placed_job_has_a_version_no_stored_state_or_other_view_has() -> None:
    job = Job("g", JobSpec(("x",), gpus=2), JobState.PENDING, version=3)
    one, two = placed_view(job, "n0", ("n0g0", "n0g1")), placed_view(job, "n1", ("n1g0", "n1g1"))
    assert one.state is two.state is JobState.ASSIGNED and one.gpus != two.gpus
    assert one.version < -1 and two.version < -1 and one.version != two.version


def test_the_placed_gpus_of_two_views_of_one_job_are_each_their_own() -> None:
    layout = NodeCache().layout(NODES)
    placed = PlacedGpus()
    job = Job("g", JobSpec(("x",), gpus=2), JobState.PENDING, version=3)
    for node in ("n0", "n1", "n0"):
        view = placed_view(job, node, (f"{node}g2", f"{node}g3"))
        record = placed.records(layout, [view], np.array([0], np.intp), np.array([view.version])).of(0)
        assert record == [layout.index[u] for u in view.gpus]


def test_a_job_at_version_minus_one_is_encoded_not_read_as_a_missing_record() -> None:
    layout = NodeCache().layout(NODES)
    job = Job("j", JobSpec(("x",)), JobState.RUNNING, node="n1", gpus=("n1g1",), version=-1)
    got = PlacedGpus().records(layout, [job], np.array([5], np.intp), np.array([job.version]))
    assert got.of(5) == [layout.index["n1g1"]]
