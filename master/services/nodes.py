"""The master's memory of the nodes: identity, liveness, streams and the latest readings.

Heartbeats land here, never in the database (docs/protocol.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from horus_core.model import Gpu, Node, NodeState, SlurmTag, gpu_type_of
from horus_core.plane import Assignment, GpuReading, Heartbeat, JobGpuReading, ToWorker
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
    gpu_stats: dict[str, GpuReading] = field(default_factory=dict)
    job_stats: tuple[JobGpuReading, ...] = ()
    running: frozenset[tuple[str, int]] = frozenset()
    fenced: bool = False  # its last heartbeat said its lease had run out: place nothing on it
    heartbeats: int = 0  # heartbeats received on any stream; ``running`` is the last one's
    # RUNNING here but not reported at registration: lost unless the worker's re-sent finals
    # (which come before its first heartbeat) say otherwise. See WorkerPlane.settle.
    unreported: set[tuple[str, int]] = field(default_factory=set)
    advertise_addr: str = ""  # where other nodes reach it (a gang's MASTER_ADDR when rank 0)
    # Bumped by NodeRegistry.record_heartbeat when a GPU's health flag changes; ``gpu_stats``
    # changes only there (in place) or by being replaced as a whole (see _current_gpus).
    health_seq: int = 0
    # (the GPUs as given, the stats dict, health_seq, the GPUs with that health): see _current_gpus
    _gpus_memo: tuple[tuple[Gpu, ...], dict[str, GpuReading], int, tuple[Gpu, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    _node_memo: Node | None = field(default=None, repr=False, compare=False)
    rack: str = ""  # horus-worker --rack (issue 11)
    runtime: str = ""  # how its worker runs jobs: "process" or "docker" ("": not said)
    slurm: SlurmTag | None = None  # a Slurm pilot: its job and when it ends (docs/slurm.md)
    # An admin's cordon/drain and the GPUs quarantined (uuid -> why): copied from the registry's
    # ServiceBook whenever either changes (NodeRegistry.apply_service).
    admin: NodeState | None = None  # CORDONED or DRAINING
    drain_deadline: float | None = None
    quarantined: dict[str, str] = field(default_factory=dict)

    @property
    def connected(self) -> bool:
        return self.session is not None and not self.session.closed

    @property
    def takes_work(self) -> bool:
        return self.state is NodeState.READY and self.admin is None and self.connected and not self.fenced

    @property
    def shown_state(self) -> NodeState:
        """LOST wins; a live node an admin took out of service shows CORDONED or DRAINING."""
        return self.admin if self.admin is not None and self.state is NodeState.READY else self.state

    def gpu_types(self) -> dict[str, str]:
        """GPU UUID -> GPU type ("v100", ...)."""
        return {g.uuid: g.gpu_type for g in self.gpus}

    def model(self) -> Node:
        """The node as policies and clients see it (every scheduling pass and ListNodes asks, for
        every node: an unchanged node is the same object, bench/load.py)."""
        gpus, node, state = self._current_gpus(), self._node_memo, self.shown_state
        if (
            node is None
            or node.gpus is not gpus
            or node.state is not state
            or node.last_seen != self.last_heard
            or node.drain_deadline != self.drain_deadline
            or node.slurm is not self.slurm
        ):
            node = self._node_memo = Node(
                self.name,
                gpus,
                state,
                self.last_heard,
                rack=self.rack,
                drain_deadline=self.drain_deadline,
                slurm=self.slurm,
            )
        return node

    def _current_gpus(self) -> tuple[Gpu, ...]:
        """The GPUs with their latest health. Looked at again only when the GPU list, the stats
        dict or ``health_seq`` changed (every pass asks for every node: reading each GPU's
        protobuf flag each time was most of a pass's time on the loop, bench/load.py); the
        tuple is rebuilt only when a flag really differs."""
        memo, stats = self._gpus_memo, self.gpu_stats
        if memo is not None and memo[0] is self.gpus and memo[1] is stats and memo[2] == self.health_seq:
            return memo[3]
        health = [s.healthy if (s := stats.get(g.uuid)) is not None else True for g in self.gpus]
        gpus = tuple(
            _with_health(g, ok, self.quarantined.get(g.uuid, ""))
            for g, ok in zip(self.gpus, health, strict=True)
        )
        if memo is not None and memo[0] is self.gpus and memo[3] == gpus:
            gpus = memo[3]  # same health as before: keep the same objects
        self._gpus_memo = (self.gpus, stats, self.health_seq, gpus)
        return gpus


def _with_health(gpu: Gpu, ok: bool, quarantine: str) -> Gpu:
    """The GPU as policies see it: unhealthy if its worker says so or the master quarantined it."""
    if quarantine:
        return dataclasses.replace(gpu, healthy=False, quarantine=quarantine)
    return gpu if ok or not gpu.healthy else dataclasses.replace(gpu, healthy=False)


@dataclass
class ServiceBook:
    """What the admins and the GPU checks took out of service (mirrors the store's node_service
    and gpu_health tables; loaded at start, written through by master.services.service)."""

    modes: dict[str, tuple[NodeState, float | None]] = field(default_factory=dict)  # node -> (mode, deadline)
    quarantined: dict[str, tuple[str, str]] = field(default_factory=dict)  # GPU uuid -> (node, why)
    ecc_seen: dict[str, int] = field(default_factory=dict)  # GPU uuid -> ECC count at its last change

    def quarantined_on(self, node: str) -> dict[str, str]:
        return {u: why for u, (n, why) in self.quarantined.items() if n == node}

    def deadlines(self) -> dict[str, float]:
        """Draining nodes -> when their remaining jobs are preempted."""
        return {n: d for n, (m, d) in self.modes.items() if m is NodeState.DRAINING and d is not None}


class NodeRegistry:
    def __init__(self) -> None:
        self.book = ServiceBook()
        self._nodes: dict[str, NodeEntry] = {}
        self._sorted: list[NodeEntry] | None = None  # by name; dropped by put
        self._max_gpus: int | None = None  # dropped by put
        self._gpu_memory: dict[str, int] | None = None  # GPU type -> its largest memory (MiB)
        self._gpu_nodes: dict[str, str] | None = None  # GPU uuid -> node; dropped by put

    def get(self, name: str) -> NodeEntry | None:
        return self._nodes.get(name)

    def all(self) -> list[NodeEntry]:
        """Every entry by name (sorted once per change of the set, not per call)."""
        if self._sorted is None:
            self._sorted = [self._nodes[k] for k in sorted(self._nodes)]
        return list(self._sorted)

    def put(self, entry: NodeEntry) -> None:
        self._nodes[entry.name] = entry
        self._sorted = self._max_gpus = self._gpu_nodes = self._gpu_memory = None
        self.apply_service(entry.name)

    def apply_service(self, name: str) -> None:
        """Copy the book's cordon/drain and quarantines of ``name`` onto its entry."""
        entry = self._nodes.get(name)
        if entry is None:
            return
        entry.admin, entry.drain_deadline = self.book.modes.get(name, (None, None))
        quarantined = self.book.quarantined_on(name)
        if quarantined != entry.quarantined:
            entry.quarantined = quarantined
            entry.health_seq += 1

    def schedulable(self) -> tuple[Node, ...]:
        """READY nodes with an open stream, not fenced: the only ones a policy may place work on."""
        return tuple(e.model() for e in self.all() if e.takes_work)

    def any_schedulable(self) -> bool:
        return any(e.takes_work for e in self._nodes.values())

    def max_gpus_per_node(self) -> int | None:
        """(Every submission asks: kept until the next put; an entry's ``gpus`` never change.)"""
        if self._max_gpus is None and self._nodes:
            self._max_gpus = max(len(e.gpus) for e in self._nodes.values())
        return self._max_gpus

    def largest_gpu_mib(self, gpu_types: tuple[str, ...] = ()) -> int | None:
        """The memory of the largest registered GPU of these types (any type: ()), in MiB; None
        while no such GPU is known. (Kept until the next put, as :meth:`max_gpus_per_node`.)"""
        if self._gpu_memory is None:
            by_type: dict[str, int] = {}
            for e in self._nodes.values():
                for g in e.gpus:
                    by_type[g.gpu_type] = max(by_type.get(g.gpu_type, 0), g.memory_mib)
            self._gpu_memory = by_type
        sizes = [m for t, m in self._gpu_memory.items() if not gpu_types or t in gpu_types]
        return max(sizes) if sizes else None

    def total_gpus(self) -> int:
        """Every registered node's GPUs together (what the largest gang may ask for)."""
        return len(self.gpu_nodes())

    def gpu_nodes(self) -> dict[str, str]:
        """GPU uuid -> the node that registered it (how a gang's GPUs split per node)."""
        if self._gpu_nodes is None:
            self._gpu_nodes = {g.uuid: e.name for e in self._nodes.values() for g in e.gpus}
        return self._gpu_nodes

    def gpu_types(self) -> set[str]:
        """The GPU types of the registered nodes (``hctl info``, the submit warnings)."""
        return {g.gpu_type or gpu_type_of(g.model) for e in self._nodes.values() for g in e.gpus}

    def runtimes(self) -> dict[str, str]:
        """Node -> how its worker runs jobs ("process", "docker"), for the nodes that said."""
        return {e.name: e.runtime for e in self._nodes.values() if e.runtime}

    def is_lost(self, name: str) -> bool:
        entry = self._nodes.get(name)
        return entry is None or entry.state is NodeState.LOST

    def send(self, name: str, msg: ToWorker) -> bool:
        entry = self._nodes.get(name)
        if entry is None or entry.session is None:
            return False
        if isinstance(msg, Assignment):
            entry.owned.add((msg.job_id, msg.attempt))
        return entry.session.send(msg)

    def owner_of_gpu(self, uuid: str) -> str | None:
        for e in self._nodes.values():
            if e.connected and any(g.uuid == uuid for g in e.gpus):
                return e.name
        return None

    def record_heartbeat(self, entry: NodeEntry, hb: Heartbeat, now: float) -> None:
        entry.last_heard = now
        entry.fenced = hb.fenced
        known = {g.uuid for g in entry.gpus}
        for s in hb.gpus:
            if s.uuid in known:
                old = entry.gpu_stats.get(s.uuid)
                if (old.healthy if old is not None else True) != s.healthy:
                    entry.health_seq += 1
                entry.gpu_stats[s.uuid] = s
        entry.job_stats = hb.jobs
        entry.running = frozenset(hb.running)
        entry.heartbeats += 1
