"""The active jobs' GPU records kept in one pool (horus_core/packing/placed.py): whatever jobs
come, go, start new attempts or fill the pool past its size, each pass reads every active job's
GPUs as the layout numbers them, at the version the pass gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.model import Gpu, Job, JobSpec, JobState, Node
from horus_core.packing import placed as placed_module
from horus_core.packing.cluster import NodeCache
from horus_core.packing.placed import PlacedGpus

NODES = tuple(
    Node(f"n{i}", tuple(Gpu(f"n{i}g{k}", f"n{i}", k, "V100", 16160, "v100") for k in range(8)))
    for i in range(4)
)
UUIDS = [g.uuid for n in NODES for g in n.gpus] + ["gone"]  # ("gone": a GPU the layout lacks)

# One pass: per job slot in play, (its version, its GPUs as positions into UUIDS).
passes = st.lists(
    st.dictionaries(
        st.integers(0, 40),
        st.tuples(st.integers(0, 3), st.lists(st.integers(0, len(UUIDS) - 1), min_size=1, max_size=8)),
        max_size=20,
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(passes, st.integers(4, 64))
def test_each_pass_reads_every_active_jobs_gpus(
    rounds: list[dict[int, tuple[int, list[int]]]], first: int
) -> None:
    """A job keeps its GPUs while its version stays (a new version: new GPUs); ``first`` is the
    pool's starting size, small so that it fills and is compacted often."""
    layout = NodeCache().layout(NODES)
    old, placed_module._FIRST = placed_module._FIRST, first
    try:
        placed, truth = PlacedGpus(), {}
        for active in rounds:
            for slot, (version, gpus) in active.items():
                if truth.get(slot, (None,))[0] != version:  # (same version: same GPUs, as in the store)
                    truth[slot] = (version, gpus)
            slots = sorted(active)
            jobs = [
                Job(f"j{s}", JobSpec(("x",)), JobState.RUNNING, gpus=tuple(UUIDS[u] for u in truth[s][1]),
                    version=truth[s][0])
                for s in slots
            ]  # fmt: skip
            got = placed.records(layout, jobs, np.array(slots, np.intp), np.array([j.version for j in jobs]))
            for s, job in zip(slots, jobs, strict=True):
                assert got.of(s) == [layout.index.get(u, -1) for u in job.gpus]
    finally:
        placed_module._FIRST = old
