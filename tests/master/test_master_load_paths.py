"""The master's hot paths under load (bench/load.py) give the same answers as the plain ones."""

from __future__ import annotations

from horus_core.gen import types_pb2 as pb
from horus_core.model import Gpu, NodeState
from master.services.nodes import NodeEntry


def entry(n_gpus: int = 3) -> NodeEntry:
    gpus = tuple(Gpu(f"GPU-{i}", "n1", i, "Tesla V100", 16_384, healthy=i != 2) for i in range(n_gpus))
    return NodeEntry("n1", gpus, NodeState.READY, last_heard=5.0)


def test_node_model_follows_gpu_health_and_reuses_unchanged_gpus() -> None:
    e = entry()
    first = e.model()
    assert [g.healthy for g in first.gpus] == [True, True, False]  # as registered
    e.gpu_stats = {"GPU-0": pb.GpuStats(uuid="GPU-0", healthy=True)}
    e.last_heard = 7.0
    again = e.model()
    assert again.last_seen == 7.0 and again.gpus is first.gpus  # nothing to rebuild
    e.gpu_stats = {
        "GPU-0": pb.GpuStats(uuid="GPU-0", healthy=False),
        "GPU-2": pb.GpuStats(uuid="GPU-2", healthy=True),
    }
    sick = e.model()
    assert [g.healthy for g in sick.gpus] == [False, True, False]  # a registered-bad GPU stays bad
    assert sick.gpus[1] is first.gpus[1]
    e.gpu_stats = {"GPU-0": pb.GpuStats(uuid="GPU-0", healthy=True)}
    assert [g.healthy for g in e.model().gpus] == [True, True, False]  # recovered
    e.gpus = e.gpus[:2]  # a new GPU list is never served from the memo of the old one
    assert len(e.model().gpus) == 2
