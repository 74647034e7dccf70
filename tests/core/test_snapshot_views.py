"""A snapshot's ready GPUs and GPU types are remembered from the last nodes asked about (a pass
usually sees the same nodes): the answer is always the one worked out from the nodes given."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from horus_core.model import ClusterSnapshot, Gpu, Node, NodeState
from horus_core.policies.gputypes import cluster_types
from horus_core.testing import nodes

STATES = st.sampled_from([NodeState.READY, NodeState.READY, NodeState.LOST])


def _fresh_ready(cluster: tuple[Node, ...]) -> tuple[Gpu, ...]:
    return tuple(g for n in cluster if n.state is NodeState.READY for g in n.gpus if g.healthy)


@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3), STATES, st.integers(0, 1), st.booleans(), st.sampled_from(["", "k80", "a100"])
        ),
        min_size=1,
        max_size=12,
    )
)
def test_ready_gpus_and_types_follow_every_change_of_the_nodes(
    steps: list[tuple[int, NodeState, int, bool, str]],
) -> None:
    cluster = list(nodes(4, 2))
    for at, state, k, healthy, kind in steps:
        node = cluster[at]
        gpus = list(node.gpus)
        gpus[k] = replace(gpus[k], healthy=healthy, gpu_type=kind)
        cluster[at] = replace(node, state=state, gpus=tuple(gpus))
        for view in (tuple(cluster), tuple(replace(n) for n in cluster)):  # the same objects, or equal ones
            snap = ClusterSnapshot(view, ())
            assert snap.ready_gpus() == _fresh_ready(view)
            expected = {g.gpu_type or "v100" for g in _fresh_ready(view)}
            assert cluster_types(snap) == expected
