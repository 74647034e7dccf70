"""Core data model: frozen dataclasses shared by the master, the worker, the policies and the simulator.

Nothing here imports grpc, protobuf, sqlite, docker or NVML. Conversion to and from the wire
format lives in :mod:`horus_core.wire`.
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from horus_core.modelcard import ModelCard

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

DEFAULT_GRACE_S = 30.0  # a job's stop grace when its spec says 0
# ``JobSpec.min_speed`` of a job that asks for no speed floor at all (not even the cluster's
# default, which fills in a 0 at submission): ``hctl submit --min-speed none``.
NO_FLOOR = -1.0


class JobState(enum.Enum):
    PENDING = "PENDING"
    ASSIGNED = "ASSIGNED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        """Holds GPUs: assigned to a worker or running there."""
        return self in (JobState.ASSIGNED, JobState.RUNNING)


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class NodeState(enum.Enum):
    READY = "READY"
    LOST = "LOST"  # missed its heartbeat deadline; its attempts are re-queued
    DRAINING = "DRAINING"  # takes no new work; its jobs are preempted when the drain's timeout passes
    CORDONED = "CORDONED"  # takes no new work (an admin's ``hctl cordon``); its jobs keep running


@dataclass(frozen=True, slots=True)
class ProfileHints:
    """What the user says about a job's GPU use; any field may be unknown (None)."""

    util_avg: float | None = None  # % of one GPU
    util_peak: float | None = None
    mem_mib: int | None = None


_SEQUENCE_FIELDS = ("command", "mounts", "gpu_types")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user asks for. Validated by :func:`horus_core.validation.validate_spec`."""

    command: tuple[str, ...]
    gpus: int = 1
    name: str = ""
    owner: str = ""
    # Workload signature: the key of measured profiles and pair tables, e.g. "ResNet-18 (batch size 32)".
    job_type: str = ""
    image: str = ""  # non-empty means: run in a Docker container
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = ""
    exclusive: bool = False  # never share its GPUs with another job
    priority: int = 0
    hints: ProfileHints = field(default_factory=ProfileHints)
    cpus: float = 0.0  # container CPU limit, 0 = none
    memory_mib: int = 0  # container memory limit, 0 = none
    mounts: tuple[str, ...] = ()  # "host:container[:ro]", only where the operator allow-lists the host path
    total_steps: int = 0  # known work (simulator / progress), 0 = unknown
    # Elastic range (Optimus): the job runs on any count in [gpus_min, gpus_max] and learns it at
    # each start; ``gpus`` is the count it asks for first. Both 0: not elastic (``gpus`` only).
    gpus_min: int = 0
    gpus_max: int = 0
    # Speed floor (issue 10): the lowest predicted/measured normalised speed (1.0 = solo) this
    # job accepts while sharing a GPU; 0 = the cluster default (filled in by the master at
    # submission, by the simulator at arrival); NO_FLOOR (-1) = none at all. docs/policies.md.
    min_speed: float = 0.0
    # GPU types the job accepts, lowercase families as in ``Gpu.gpu_type`` ("v100", "a100");
    # empty = any type. Every policy places the job only on GPUs of these types.
    gpu_types: tuple[str, ...] = ()
    # Gang shape across nodes (issue 11): ``gpus_per_node`` GPUs on each of ``nodes`` nodes;
    # 0 = any shape (the placement prefers one node, then the fewest nodes in one rack).
    gpus_per_node: int = 0
    nodes: int = 0
    # Queues and priority classes (issue 13, docs/queues.md): "" = the user's default queue /
    # the default class. ``grace_s``: SIGTERM -> SIGKILL grace when the job is stopped
    # (preempted, cancelled); 0 = the default (DEFAULT_GRACE_S).
    queue: str = ""
    priority_class: str = ""
    grace_s: float = 0.0
    # What the job's model is (issue 30, docs/prediction.md): a card made by ``hctl describe`` or
    # the SDK's ``describe``; the interference model predicts the job's profile from it until the
    # job's own measurements take over. None = no card.
    model_card: ModelCard | None = None

    # GPU memory cap per GPU in MiB (issue 31, docs/sharing.md): what the job may use on each of
    # its GPUs while it shares them; the master packs by it and the worker enforces it. 0 = not
    # declared: the master uses the predicted or measured peak footprint (plus a margin).
    gpu_memory_mib: int = 0

    def __post_init__(self) -> None:
        # A string where a sequence of strings belongs would pass as a tuple of characters.
        for name in _SEQUENCE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, str | bytes):
                hint = ' (e.g. ("sh", "-c", "echo hi") or "echo hi".split())' if name == "command" else ""
                raise TypeError(
                    f"JobSpec.{name} must be a sequence of strings{hint}, not the string {value!r}"
                )
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @property
    def elastic(self) -> bool:
        return self.gpus_max > 0

    def gpu_range(self) -> tuple[int, int]:
        """The GPU counts an attempt may have: ``(gpus_min, gpus_max)``, or ``(gpus, gpus)``."""
        return (self.gpus_min, self.gpus_max) if self.elastic else (self.gpus, self.gpus)

    def accepts_type(self, gpu_type: str) -> bool:
        """Whether the job may run on a GPU of family ``gpu_type`` (empty list: any)."""
        return not self.gpu_types or gpu_type in self.gpu_types


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    spec: JobSpec
    state: JobState
    attempt: int = 0  # 0 before the first assignment; each assignment increments it
    submitted_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    node: str = ""  # where the current/last attempt runs
    gpus: tuple[str, ...] = ()  # GPU UUIDs of the current/last attempt
    reason: str = ""  # why it is in its state (pending reason, failure cause, ...)
    exit_code: int | None = None
    predicted_slowdown: float = 1.0  # predicted normalised speed (1.0 = solo) at placement
    # The store's change counter for this job: 0 at submission, +1 on every committed change of
    # its row (the simulator counts its own changes the same way). ``(id, version)`` names one
    # state of one job: what caches key on.
    version: int = 0
    # Why a pending job waits, as a code of the fixed vocabulary of horus_core.reasoncodes
    # ("Resources", "Priority", ...); ``reason`` is the sentence. "" when not pending.
    reason_code: str = ""
    # A pending job's place in its queue as the last scheduling pass served it (1 = next) and the
    # queue it counts in; 0 / "" = unknown. Filled in by the master's answers, never stored.
    queue_position: int = 0
    queue_name: str = ""
    # The nodes of the current/last attempt in rank order (``nodes[0] == node``); empty for an
    # attempt on one node (see :func:`horus_core.gang.job_nodes`).
    nodes: tuple[str, ...] = ()
    # When an attempt was last stopped and the job re-queued (preemption, drain, reclaim, lost
    # node) and why; None / "" = never. Filled in by the master's GetJob answer, never stored.
    last_preempted_at: float | None = None
    last_preemption: str = ""
    # GPU memory (issue 31, docs/sharing.md): the cap per GPU of the current/last attempt, set at
    # placement (0: none, the job has its GPUs to itself), and the peak per GPU the worker
    # measured for the last attempt that ended (0: not known).
    gpu_memory_cap_mib: int = 0
    gpu_memory_peak_mib: int = 0
    # > 0: an attempt went over its GPU memory while sharing; the job now runs alone with this
    # cap (its ``spec`` reads exclusive, with this ``gpu_memory_mib``: horus_core.caps.alone).
    contained_mib: int = 0


@dataclass(frozen=True, slots=True)
class Gpu:
    uuid: str
    node: str
    index: int
    model: str  # e.g. "NVIDIA H100 80GB HBM3", "V100"
    memory_mib: int
    gpu_type: str = ""  # normalised family used by interference data: "v100", "p100", "k80", "h100", ...
    healthy: bool = True
    # Why the master quarantined it (an Xid or ECC error, docs/nodes.md); "" = not quarantined.
    # A quarantined GPU is also ``healthy=False`` in what policies see.
    quarantine: str = ""
    # A MIG instance the worker reports as a GPU of its own (docs/sharing.md): its share of the
    # physical GPU's compute and that GPU's UUID; a whole GPU: 1.0 and "".
    compute_fraction: float = 1.0
    parent_uuid: str = ""


@dataclass(frozen=True, slots=True)
class SlurmTag:
    """The Slurm job a worker (a pilot of ``horus-slurm``, docs/slurm.md) runs in."""

    job_id: str
    end_time: float = 0.0  # when Slurm ends the job (unix seconds); 0 = no limit known


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: tuple[Gpu, ...]
    state: NodeState = NodeState.READY
    last_seen: float = 0.0
    rack: str = ""  # the worker's --rack; "" = not given (all such nodes count as one rack)
    drain_deadline: float | None = None  # DRAINING: when its remaining jobs are preempted
    slurm: SlurmTag | None = None  # a Slurm pilot: its job and when that job ends


_STATE_OF = operator.attrgetter("state")


class LastAnswer(Generic[K, V]):
    """``fn(key)``, remembered for the last key asked about: a pass (and a simulator round)
    usually asks about the same nodes as the one before, often the very objects, which ``==``
    confirms without looking inside them. Keyed on the value, so a changed key is never
    answered from it; the pair is one attribute, so a thread reads a consistent one."""

    def __init__(self, fn: Callable[[K], V]) -> None:
        self.fn = fn
        self.pair: tuple[K, V] | None = None

    def __call__(self, key: K) -> V:
        pair = self.pair
        if pair is not None and (pair[0] is key or pair[0] == key):
            return pair[1]
        value = self.fn(key)
        self.pair = (key, value)
        return value


def _ready_of(nodes: tuple[Node, ...]) -> tuple[Gpu, ...]:
    ready = NodeState.READY
    return tuple(g for n in nodes if n.state is ready for g in n.gpus if g.healthy)


_READY = LastAnswer(_ready_of)


def _ready_gpus(snapshot: ClusterSnapshot) -> tuple[Gpu, ...]:
    return _READY(snapshot.nodes)


def _by_id(snapshot: ClusterSnapshot) -> dict[str, Job]:
    return {j.id: j for j in snapshot.jobs}


_SPLIT = ("pending", "active", "running")


def _marks(states: list[JobState], state: JobState) -> Iterator[bool]:
    """Whether each of ``states`` is ``state`` (enum members are singletons: identity)."""
    return map(operator.is_, states, repeat(state))


@dataclass(frozen=True, slots=True)
class JobChanges:
    """The jobs that changed between two snapshots one source handed out in turn (the master's
    live index: it knows what each commit changed), so a policy's ledgers over the live jobs
    follow the changes instead of walking every live job each pass.

    ``source`` names the source (a new index has a new name), ``epoch`` this snapshot, ``base``
    the one it handed out before; ``jobs`` maps each job changed in between to what it is in
    this snapshot (None: no longer live). Every other job is the very object it was then."""

    source: str
    base: int
    epoch: int
    jobs: Mapping[str, Job | None]
    # Per job of the snapshot's pending() then active() jobs, in that order (None: not given):
    # its number in the source (given once, never reused) and its version, so a policy's tables
    # look the jobs up as arrays.
    numbers: NDArray[np.int64] | None = None
    versions: NDArray[np.int64] | None = None

    def since(self, source: str, epoch: int) -> Mapping[str, Job | None] | None:
        """What changed since the snapshot a consumer last saw (its ``source`` and ``epoch``):
        nothing if it was this one, :attr:`jobs` if it was the one before, else None (it must
        look at every job)."""
        if source != self.source:
            return None
        if epoch == self.epoch:
            return {}
        return self.jobs if epoch == self.base else None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything a policy may look at. ``jobs`` holds the pending and active jobs only.

    The views below are computed once per snapshot (a pass asks for them from several layers of
    a policy); :meth:`with_nodes` makes a snapshot of other nodes that shares the job views.
    """

    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    _by_jobs: dict[str, tuple[Job, ...]] = field(default_factory=dict, compare=False, repr=False)
    _derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    changes: JobChanges | None = field(default=None, compare=False)  # (None: not known)

    @staticmethod
    def split_as(
        nodes: tuple[Node, ...],
        jobs: tuple[Job, ...],
        split: dict[str, tuple[Job, ...]],
        changes: JobChanges | None = None,
    ) -> ClusterSnapshot:
        """A snapshot whose :meth:`pending`, :meth:`active` and :meth:`running` are ``split``'s
        (keys ``pending``, ``active``, ``running``): a source that keeps them as its jobs change
        (the master's live index) hands them over instead of a walk over ``jobs`` per pass. They
        must be exactly what the snapshot would compute (``jobs`` filtered by state, in order);
        ``changes``: what changed since the source's last snapshot (:class:`JobChanges`)."""
        return ClusterSnapshot(nodes, jobs, {k: split[k] for k in _SPLIT}, {}, changes)

    def with_nodes(self, nodes: tuple[Node, ...]) -> ClusterSnapshot:
        """The same jobs on ``nodes`` (their job views shared, not recomputed)."""
        return ClusterSnapshot(nodes, self.jobs, self._by_jobs, {}, self.changes)

    def derived(self, key: str, fn: Callable[[ClusterSnapshot], T]) -> T:
        """``fn(self)``, computed once per snapshot under ``key`` (a policy layer's view of it;
        one key names one function, so the value's type is ``fn``'s)."""
        memo = self._derived
        if key not in memo:
            memo[key] = fn(self)
        return cast(T, memo[key])

    def by_id(self) -> dict[str, Job]:
        """The jobs by id (once per snapshot; an id given twice maps to its last job)."""
        return self.derived("by_id", _by_id)

    def ready_gpus(self) -> tuple[Gpu, ...]:
        """The healthy GPUs of READY nodes, node by node."""
        return self.derived("ready_gpus", _ready_gpus)

    def pending(self) -> tuple[Job, ...]:
        """The jobs in PENDING, in snapshot order."""
        return self._split()["pending"]

    def active(self) -> tuple[Job, ...]:
        """The jobs ASSIGNED or RUNNING, in snapshot order."""
        return self._split()["active"]

    def running(self) -> tuple[Job, ...]:
        """The jobs RUNNING, in snapshot order."""
        return self._split()["running"]

    def _split(self) -> dict[str, tuple[Job, ...]]:
        memo = self._by_jobs
        if not memo:  # (C-level walks: a pass asks this of 10,000s of jobs)
            jobs, states = self.jobs, list(map(_STATE_OF, self.jobs))
            pending = tuple(compress(jobs, _marks(states, JobState.PENDING)))
            running = tuple(compress(jobs, _marks(states, JobState.RUNNING)))
            active = running
            if any(_marks(states, JobState.ASSIGNED)):  # both, in snapshot order
                either = map(
                    operator.or_, _marks(states, JobState.ASSIGNED), _marks(states, JobState.RUNNING)
                )
                active = tuple(compress(jobs, either))
            memo["pending"], memo["active"], memo["running"] = pending, active, running
        return memo


# ----------------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Assign:
    """Start the next attempt of a pending job on ``gpus``: all on ``node``, or, for a gang
    spread over nodes, in rank order (all GPUs of the rank-0 node ``node`` first, then rank 1...)."""

    job_id: str
    node: str
    gpus: tuple[str, ...]
    predicted_slowdown: float = 1.0


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop the running attempt of a job and put it back in the queue."""

    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Wait:
    """A pending job stays pending; ``reason`` is shown to the user, ``code`` is its class in
    the vocabulary of :mod:`horus_core.reasoncodes` ("" = not classified: the master fills one in)."""

    job_id: str
    reason: str
    # A reason code from the fixed vocabulary (e.g. "QuotaExceeded"); "" = none given.
    code: str = ""


Action = Assign | Preempt | Wait


_MIG_PROFILE = re.compile(r"\bmig\s+(\d+g\.\d+gb)(\+me)?\b")


def gpu_type_of(model: str) -> str:
    """Normalise a GPU model name to the family key used by interference data; a MIG instance
    (NVML names it like "NVIDIA H100 80GB HBM3 MIG 3g.40gb") is its family and profile,
    "h100-3g.40gb" (docs/sharing.md)."""
    low = model.lower()
    mig = _MIG_PROFILE.search(low)
    for family in ("h200", "h100", "a100", "a10g", "l40s", "l4", "v100", "p100", "k80", "t4", "a30", "a10"):
        if family in low:
            if mig is not None:
                return f"{family}-{mig.group(1)}" + ("-me" if mig.group(2) else "")
            return family
    if mig is not None:
        return f"mig-{mig.group(1)}" + ("-me" if mig.group(2) else "")
    return low.replace(" ", "-") or "unknown"
