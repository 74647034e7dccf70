"""The fixed vocabulary of pending-reason codes (modelled on Slurm's) and the rules that pick one.

Every pending job carries one code (``Job.reason_code``) next to its sentence (``Job.reason``).
The table in docs/reasons.md says what each means and what a user can do about it; a test pins
that the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from horus_core.model import Action, Gpu, Job, Node, NodeState, Wait, gpu_type_of

RESOURCES = "Resources"
PRIORITY = "Priority"
INTERFERENCE = "Interference"
GANG_TOO_LARGE = "GangTooLarge"
GPU_TYPE_UNAVAILABLE = "GpuTypeUnavailable"
NODE_CORDONED = "NodeCordoned"
NO_READY_NODES = "NoReadyNodes"
PREEMPTED = "Preempted"
SUBMITTED = "Submitted"
QUOTA_EXCEEDED = "QuotaExceeded"
WAITING_FOR_RECLAIM = "WaitingForReclaim"
GPU_MEMORY_EXCEEDED = "GpuMemoryExceeded"

# code -> (what it means, what to do): the documented vocabulary (docs/reasons.md).
VOCABULARY: dict[str, tuple[str, str]] = {
    SUBMITTED: ("accepted; no scheduling pass has looked at it yet", "wait for the next pass"),
    RESOURCES: (
        "GPUs that suit it exist, but not enough of them are free now (slots, memory, idle GPUs)",
        "wait, or ask for fewer GPUs or less memory",
    ),
    PRIORITY: (
        "jobs ahead of it in its queue are served first (queue order, look-ahead, fair-share rounds)",
        "wait; `hctl queue` shows its position",
    ),
    INTERFERENCE: (
        "every GPU with room runs a job it may not share with (pair slowdown, speed floor, memory)",
        "wait, lower --min-speed, or ask for --exclusive GPUs",
    ),
    GANG_TOO_LARGE: (
        "it needs more GPUs on one node than any schedulable node has",
        "ask for fewer GPUs (or an elastic range)",
    ),
    GPU_TYPE_UNAVAILABLE: (
        "no GPU of a type it accepts is in the cluster (or every such type runs it too slowly)",
        "widen --gpu-type",
    ),
    NODE_CORDONED: (
        "GPUs that could run it are on cordoned or draining nodes, or quarantined",
        "ask an admin to `hctl uncordon` the node or GPU",
    ),
    NO_READY_NODES: ("no node is ready (none registered, or all lost)", "ask an admin to start workers"),
    PREEMPTED: ("it was preempted and re-queued; the next pass places it again", "wait"),
    QUOTA_EXCEEDED: ("its queue is at its quota and may not borrow more", "wait for the queue's jobs to end"),
    WAITING_FOR_RECLAIM: (
        "its queue's quota is lent out and borrowed jobs are being preempted to give it back",
        "wait (within the preemption grace period)",
    ),
    GPU_MEMORY_EXCEEDED: (
        "an attempt went over its GPU memory cap while sharing; it runs again alone, with its "
        "measured peak as its new cap (docs/sharing.md)",
        "wait for a GPU to itself, or submit with a larger --gpu-memory",
    ),
}
CODES = frozenset(VOCABULARY)


@dataclass(frozen=True, slots=True)
class OutOfService:
    """What cordoned/draining nodes and quarantined GPUs withhold from the policies."""

    largest_node: int = 0  # healthy, unquarantined GPUs on the biggest out-of-service node
    idle_gpus: int = 0  # such GPUs with no active job on them (nor an attempt still stopping)
    idle_on_one_node: int = 0  # the most of those on any one node
    # The same per GPU type, (type, largest node, idle GPUs, idle on one node): a job is judged on
    # the types it accepts.
    by_type: tuple[tuple[str, int, int, int], ...] = field(default=(), compare=False)

    @property
    def any(self) -> bool:
        return self.largest_node > 0

    def of_types(self, types: Sequence[str]) -> OutOfService:
        """What is withheld of ``types`` only (empty: any type)."""
        if not types or not self.by_type:
            return self
        rows = [r for r in self.by_type if r[0] in types]
        return OutOfService(
            max((r[1] for r in rows), default=0),
            sum(r[2] for r in rows),
            max((r[3] for r in rows), default=0),
            tuple(rows),
        )


def out_of_service(nodes: Iterable[Node], jobs: Iterable[Job], stopping: Iterable[str] = ()) -> OutOfService:
    """What placement could use if admins released every cordon, drain and quarantine (only
    nodes that are not LOST count: a lost node has no worker to run anything). A GPU is idle when
    no active job holds it and no attempt is still stopping on it (``stopping``: their GPUs)."""
    busy = {g for j in jobs if j.state.active for g in j.gpus} | set(stopping)
    largest: dict[str, int] = {}
    idle: dict[str, int] = {}
    one: dict[str, int] = {}
    for n in nodes:
        if n.state is NodeState.LOST:
            continue
        usable = [g for g in n.gpus if g.healthy or g.quarantine]  # with its quarantines released
        held = usable if n.state is not NodeState.READY else [g for g in n.gpus if g.quarantine]
        for t in {_type(g) for g in held}:
            free = sum(1 for g in held if g.uuid not in busy and _type(g) == t)
            largest[t] = max(largest.get(t, 0), sum(1 for g in usable if _type(g) == t))
            idle[t] = idle.get(t, 0) + free
            one[t] = max(one.get(t, 0), free)
    rows = tuple(sorted((t, largest[t], idle[t], one[t]) for t in largest))
    return OutOfService(
        max(largest.values(), default=0), sum(idle.values()), max(one.values(), default=0), rows
    )


def _type(gpu: Gpu) -> str:
    return gpu.gpu_type or gpu_type_of(gpu.model)


def refine(
    wait: Wait, gpus: int, withheld: OutOfService, types: Sequence[str] = (), spans: bool = False
) -> str:
    """The code of ``wait`` (for a job asking for ``gpus`` GPUs of ``types``, empty: any) once the
    master knows what is out of service: a job that only waits for room the cordons hold back
    says ``NodeCordoned``; room of types the job does not accept does not count. A job waiting for
    free GPUs (``Resources``) says so only where the idle out-of-service GPUs would hold it as it
    is placed: on one node, or over several for a job that spans nodes (``spans``, or more GPUs
    than any out-of-service node has). GPUs in use there, or idle ones spread too thinly, leave it
    ``Resources``: releasing the cordons would not start it."""
    code = wait.code or RESOURCES
    withheld = withheld.of_types(types)
    if not withheld.any:
        return code
    if code == GPU_TYPE_UNAVAILABLE and types and gpus <= withheld.largest_node:
        return NODE_CORDONED  # its types are in the cluster, only out of service
    if code in (GANG_TOO_LARGE, NO_READY_NODES) and gpus <= withheld.largest_node:
        return NODE_CORDONED
    spread = spans or gpus > withheld.largest_node
    if code == RESOURCES and (gpus <= withheld.idle_on_one_node or (spread and gpus <= withheld.idle_gpus)):
        return NODE_CORDONED
    return code


def _out(types: Sequence[str]) -> str:
    return f"every GPU of type {', '.join(types)} is on a cordoned or draining node, or quarantined"


_REFINABLE = frozenset({RESOURCES, GANG_TOO_LARGE, NO_READY_NODES, GPU_TYPE_UNAVAILABLE, ""})


def classify(actions: list[Action], jobs: Iterable[Job], withheld: OutOfService) -> list[Action]:
    """``actions`` with each Wait's code refined (:func:`refine`); the same list when nothing is
    out of service. ``jobs``: at least the waiting ones (for their GPU counts and types)."""
    if not withheld.any:
        return actions
    # (elastic: its smallest count)
    need = {j.id: (j.spec.gpu_range()[0], j.spec.gpu_types, j.spec.nodes > 1) for j in jobs}
    out: list[Action] = []
    for a in actions:
        if isinstance(a, Wait) and a.code in _REFINABLE and a.job_id in need:
            gpus, types, spans = need[a.job_id]
            code = refine(a, gpus, withheld, types, spans)
            if code != a.code:
                reason = _out(types) if a.code == GPU_TYPE_UNAVAILABLE else a.reason
                a = Wait(a.job_id, reason, code)
        out.append(a)
    return out


DEFAULT_QUEUE = "default"


def queue_of(job: Job) -> str:
    """The queue a job waits in: its spec's ``queue`` (filled in at submission with --queues),
    else "default"."""
    return job.spec.queue or DEFAULT_QUEUE


def queue_positions(waits: Iterable[Wait], job: Callable[[str], Job | None]) -> dict[str, tuple[str, int]]:
    """Job id -> (queue, position from 1) of every waiting job, in the order the policy's Waits
    come (the order it serves its queue), counted per queue."""
    counts: dict[str, int] = {}
    out: dict[str, tuple[str, int]] = {}
    for w in waits:
        j = job(w.job_id)
        if j is None or w.job_id in out:
            continue
        q = queue_of(j)
        counts[q] = counts.get(q, 0) + 1
        out[w.job_id] = (q, counts[q])
    return out


Place = Callable[[Job], "tuple[str, int] | None"]


def queue_listing(pending: Sequence[Job], place: Place) -> list[tuple[str, int, Job]]:
    """(queue, position from 1, job) of each pending job, queue by queue: first the jobs the last
    pass ordered (``place``: their queue and position), in that order, then the others in the
    order given. Positions count on from 1 in each queue."""
    keyed = []
    for i, job in enumerate(pending):
        at = place(job)
        keyed.append((at[0] if at else queue_of(job), at[1] if at else math.inf, i, job))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    counts: dict[str, int] = {}
    out = []
    for q, _, _, job in keyed:
        counts[q] = counts.get(q, 0) + 1
        out.append((q, counts[q], job))
    return out


class QueuePositions:
    """Each waiting job's (queue, position) after a pass, worked out from the pass's actions the
    first time someone asks (a pass itself only keeps the list: bench/reason_codes.py)."""

    def __init__(
        self, actions: Sequence[Action] = (), job: Callable[[str], Job | None] = lambda _: None
    ) -> None:
        self._actions: Sequence[Action] | None = actions
        self._job = job
        self._places: dict[str, tuple[str, int]] = {}

    def get(self, job_id: str) -> tuple[str, int] | None:
        if self._actions is not None:
            self._places = queue_positions((a for a in self._actions if isinstance(a, Wait)), self._job)
            self._actions = None
        return self._places.get(job_id)
