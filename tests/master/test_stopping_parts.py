"""The book of attempt parts told to stop (master/services/stopping.py): each part holds its own
node's GPUs and the job's next attempt until that part is seen stopped, node by node."""

from __future__ import annotations

from horus_core.model import Gpu, Job, JobSpec, JobState, NodeState
from horus_core.plane import Heartbeat
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.stopping import StoppingParts, parts


def _registry(*names: str) -> NodeRegistry:
    reg = NodeRegistry()
    for name in names:
        gpus = tuple(Gpu(f"GPU-{name}-{i}", name, i, "Tesla V100", 16384) for i in range(2))
        reg.put(NodeEntry(name, gpus, NodeState.READY, last_heard=0.0))
    return reg


def _gang(attempt: int = 1) -> Job:
    gpus = ("GPU-a-0", "GPU-a-1", "GPU-b-0", "GPU-b-1")
    return Job("g", JobSpec(command=("x",), gpus=4), JobState.RUNNING, attempt=attempt, node="a",
               gpus=gpus, nodes=("a", "b"))  # fmt: skip


def test_a_gangs_parts_are_freed_node_by_node_by_their_final_updates() -> None:
    reg, book = _registry("a", "b"), StoppingParts()
    book.add_attempt(_gang(), reg)
    assert book.gpus() == {"GPU-a-0", "GPU-a-1", "GPU-b-0", "GPU-b-1"} and book.jobs() == {"g"}
    assert not book.stopped("a", "g", 2)  # another attempt's final update frees nothing
    assert book.stopped("a", "g", 1)
    assert book.gpus() == {"GPU-b-0", "GPU-b-1"} and book.jobs() == {"g"}  # node-b still holds
    assert not book.stopped("a", "g", 1)  # (a repeated final update: nothing left to free)
    assert book.stopped("b", "g", 1)
    assert book.gpus() == set() and book.jobs() == set() and len(book) == 0


def test_only_the_parts_named_are_held() -> None:
    reg, book = _registry("a", "b"), StoppingParts()
    book.add_attempt(_gang(), reg, ["b"])  # node-a's part had already ended
    assert book.gpus() == {"GPU-b-0", "GPU-b-1"}


def test_a_heartbeat_without_the_part_or_a_lost_node_frees_it() -> None:
    reg, book = _registry("a", "b"), StoppingParts()
    book.add_attempt(_gang(), reg)
    a, b = reg.get("a"), reg.get("b")
    assert a is not None and b is not None
    reg.record_heartbeat(a, Heartbeat(running=(("g", 1),)), now=1.0)  # still running there
    book.prune(reg)
    assert book.gpus() == {"GPU-a-0", "GPU-a-1", "GPU-b-0", "GPU-b-1"}
    reg.record_heartbeat(a, Heartbeat(), now=2.0)  # ended there
    book.prune(reg)
    assert book.gpus() == {"GPU-b-0", "GPU-b-1"}
    b.state = NodeState.LOST
    book.prune(reg)
    assert book.jobs() == set()


def test_a_gpu_of_a_node_no_longer_known_is_named_on_no_part() -> None:
    reg = _registry("a")  # node-b is gone: its part still holds the next attempt, no GPU named
    assert parts(_gang(), reg) == (("a", ("GPU-a-0", "GPU-a-1")), ("b", ()))
    one = Job("s", JobSpec(command=("x",), gpus=1), JobState.RUNNING, attempt=1, node="a", gpus=("GPU-a-1",))
    assert parts(one, reg) == (("a", ("GPU-a-1",)),)
