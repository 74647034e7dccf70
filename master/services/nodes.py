"""The master's memory of the nodes: identity, liveness, streams and the latest readings.

Heartbeats land here, never in the database (docs/protocol.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import Gpu, Node, NodeState
from master.services.session import Session


@dataclass
class NodeEntry:
    name: str
    gpus: tuple[Gpu, ...]
    state: NodeState
    last_heard: float  # clock time of the last message (or of the master's start, for grace)
    version: str = ""
    session: Session | None = None
    lost_handled: bool = False  # its attempts were re-queued since it last registered
    registered_at: float = 0.0
    identity: str = ""  # who registered it: "cert:<CN>", "join-token" or "anonymous"
    epoch: int = 0  # of its current registration; 0: not known (loaded after a master restart)
    # Attempts this registration may report on: assigned on it, or carried over from the previous
    # registration of the same worker (same identity, resumed epoch). Others' updates are ignored.
    owned: set[tuple[str, int]] = field(default_factory=set)
    gpu_stats: dict[str, pb.GpuStats] = field(default_factory=dict)
    job_stats: tuple[pb.JobGpuStats, ...] = ()
    running: frozenset[tuple[str, int]] = frozenset()
    fenced: bool = False  # its last heartbeat said its lease had run out: place nothing on it
    heartbeats: int = 0  # heartbeats received on any stream; ``running`` is the last one's
    # RUNNING here but not reported at registration: lost unless the worker's re-sent finals
    # (which come before its first heartbeat) say otherwise. See WorkerPlane.settle.
    unreported: set[tuple[str, int]] = field(default_factory=set)
    # (the GPUs as given, their health flags, the GPUs with that health): see _current_gpus
    _gpus_memo: tuple[tuple[Gpu, ...], list[bool], tuple[Gpu, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    _node_memo: Node | None = field(default=None, repr=False, compare=False)

    @property
    def connected(self) -> bool:
        return self.session is not None and not self.session.closed

    @property
    def takes_work(self) -> bool:
        return self.state is NodeState.READY and self.connected and not self.fenced

    def gpu_types(self) -> dict[str, str]:
        """GPU UUID -> GPU type ("v100", ...)."""
        return {g.uuid: g.gpu_type for g in self.gpus}

    def model(self) -> Node:
        """The node as policies and clients see it (every scheduling pass and ListNodes asks, for
        every node: an unchanged node is the same object, bench/load.py)."""
        gpus, node = self._current_gpus(), self._node_memo
        if (
            node is None
            or node.gpus is not gpus
            or node.state is not self.state
            or node.last_seen != self.last_heard
        ):
            node = self._node_memo = Node(self.name, gpus, self.state, self.last_heard)
        return node

    def _current_gpus(self) -> tuple[Gpu, ...]:
        """The GPUs with their latest health; rebuilt only when a health flag changed."""
        stats = self.gpu_stats
        health = [s.healthy if (s := stats.get(g.uuid)) is not None else True for g in self.gpus]
        memo = self._gpus_memo
        if memo is None or memo[0] is not self.gpus or memo[1] != health:
            gpus = tuple(
                g if ok or not g.healthy else dataclasses.replace(g, healthy=False)
                for g, ok in zip(self.gpus, health, strict=True)
            )
            memo = self._gpus_memo = (self.gpus, health, gpus)
        return memo[2]


class NodeRegistry:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeEntry] = {}

    def get(self, name: str) -> NodeEntry | None:
        return self._nodes.get(name)

    def all(self) -> list[NodeEntry]:
        return [self._nodes[k] for k in sorted(self._nodes)]

    def put(self, entry: NodeEntry) -> None:
        self._nodes[entry.name] = entry

    def schedulable(self) -> tuple[Node, ...]:
        """READY nodes with an open stream, not fenced: the only ones a policy may place work on."""
        return tuple(e.model() for e in self.all() if e.takes_work)

    def any_schedulable(self) -> bool:
        return any(e.takes_work for e in self._nodes.values())

    def max_gpus_per_node(self) -> int | None:
        sizes = [len(e.gpus) for e in self._nodes.values()]
        return max(sizes) if sizes else None

    def is_lost(self, name: str) -> bool:
        entry = self._nodes.get(name)
        return entry is None or entry.state is NodeState.LOST

    def send(self, name: str, msg: wpb.MasterMessage) -> bool:
        entry = self._nodes.get(name)
        if entry is None or entry.session is None:
            return False
        if msg.WhichOneof("msg") == "assign":
            entry.owned.add((msg.assign.job_id, msg.assign.attempt))
        return entry.session.send(msg)

    def owner_of_gpu(self, uuid: str) -> str | None:
        for e in self._nodes.values():
            if e.connected and any(g.uuid == uuid for g in e.gpus):
                return e.name
        return None

    def record_heartbeat(self, entry: NodeEntry, hb: wpb.Heartbeat, now: float) -> None:
        entry.last_heard = now
        entry.fenced = hb.fenced
        known = {g.uuid for g in entry.gpus}
        for s in hb.gpus:
            if s.uuid in known:
                entry.gpu_stats[s.uuid] = s
        entry.job_stats = tuple(hb.jobs)
        entry.running = frozenset((r.job_id, r.attempt) for r in hb.running)
        entry.heartbeats += 1
