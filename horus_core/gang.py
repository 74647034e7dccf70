"""Multi-node gangs (issue 11), pure: a gang attempt's part states and what they mean for the job,
how its GPUs split per node, its rendezvous port, and the environment each node's process gets.

A gang's attempt has one *part* per node, in rank order (``Job.nodes``). The job is RUNNING once
every part has started, SUCCEEDED once every part succeeded; the first part that fails or stops
ends the whole attempt: the others are stopped and the job is re-queued once (docs/gangs.md).
"""

from __future__ import annotations

import enum
import re
import zlib
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from horus_core.model import Job, JobState


class Part(enum.Enum):
    ASSIGNED = "ASSIGNED"  # sent to its node, not yet reported running
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"  # stopped by its worker (killed, lease expired, refused)

    @property
    def done(self) -> bool:
        return self in (Part.SUCCEEDED, Part.FAILED, Part.STOPPED)


class Verdict(enum.Enum):
    """What a part's report means for the job."""

    NONE = "NONE"  # nothing changes for the job
    RUNNING = "RUNNING"  # every part has started
    SUCCEEDED = "SUCCEEDED"  # every part succeeded
    FAILED = "FAILED"  # a part failed: the attempt is over
    STOPPED = "STOPPED"  # a part stopped without a result: the attempt is over


@dataclass(frozen=True, slots=True)
class Outcome:
    parts: tuple[Part, ...]
    verdict: Verdict
    stop: tuple[str, ...] = ()  # nodes whose parts still run and must be stopped


_REPORTED = {
    JobState.RUNNING: Part.RUNNING,
    JobState.SUCCEEDED: Part.SUCCEEDED,
    JobState.FAILED: Part.FAILED,
    JobState.CANCELLED: Part.STOPPED,
}


def job_nodes(job: Job) -> tuple[str, ...]:
    """The nodes of the job's current/last attempt in rank order (one node: ``(job.node,)``)."""
    return job.nodes or ((job.node,) if job.node else ())


def is_gang(job: Job) -> bool:
    return len(job.nodes) > 1


def start(nodes: Sequence[str]) -> tuple[Part, ...]:
    return (Part.ASSIGNED,) * len(nodes)


def parts_of(values: Sequence[str], n: int) -> tuple[Part, ...]:
    """Stored part states (as written by :func:`stored`); missing or unknown ones read ASSIGNED."""
    known = {p.value: p for p in Part}
    return tuple(known.get(values[i], Part.ASSIGNED) if i < len(values) else Part.ASSIGNED for i in range(n))


def stored(parts: Sequence[Part]) -> tuple[str, ...]:
    return tuple(p.value for p in parts)


def report(nodes: Sequence[str], parts: Sequence[Part], node: str, state: JobState) -> Outcome:
    """The part on ``node`` reports ``state`` (RUNNING or a final one). Idempotent: a part that
    is done stays as it is, and a repeated report changes nothing."""
    if node not in nodes or state not in _REPORTED:
        raise ValueError(f"not a report of this gang: {node!r} {state}")
    i = nodes.index(node)
    old = tuple(parts)
    if old[i].done or old[i] is _REPORTED[state]:
        return Outcome(old, Verdict.NONE)
    new = (*old[:i], _REPORTED[state], *old[i + 1 :])
    if new[i] in (Part.FAILED, Part.STOPPED):
        verdict = Verdict.FAILED if new[i] is Part.FAILED else Verdict.STOPPED
        return Outcome(new, verdict, tuple(n for n, p in zip(nodes, new, strict=True) if not p.done))
    if all(p is Part.SUCCEEDED for p in new):
        return Outcome(new, Verdict.SUCCEEDED)
    started = all(p is not Part.ASSIGNED for p in new) and any(p is Part.ASSIGNED for p in old)
    return Outcome(new, Verdict.RUNNING if started else Verdict.NONE)


def part_active(job: Job, parts: Sequence[str], node: str) -> bool:
    """Whether the job's attempt still has a part on ``node`` that has not ended (a job on one
    node: whether it is there)."""
    nodes = job_nodes(job)
    if node not in nodes:
        return False
    if not is_gang(job):
        return True
    return not parts_of(parts, len(nodes))[nodes.index(node)].done


def split(gpus: Sequence[str], node_of: Mapping[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``gpus`` grouped by node in rank order: ``((node, its GPUs), ...)``. Raises ValueError for
    a GPU of no known node, or a node whose GPUs are not listed together (rank order)."""
    out: list[tuple[str, list[str]]] = []
    for uuid in gpus:
        node = node_of.get(uuid)
        if node is None:
            raise ValueError(f"GPU {uuid} is on no known node")
        if out and out[-1][0] == node:
            out[-1][1].append(uuid)
        elif any(n == node for n, _ in out):
            raise ValueError(f"the GPUs of node {node} are not listed together (rank order)")
        else:
            out.append((node, [uuid]))
    return tuple((n, tuple(g)) for n, g in out)


def rendezvous_port(job_id: str, attempt: int, taken: Set[int], lo: int, hi: int) -> int:
    """A port in ``[lo, hi]`` for the gang's rendezvous: deterministic from the attempt, and the
    first one from there (wrapping) not in ``taken`` (the ports of other live gangs)."""
    if not 0 < lo <= hi < 65536:
        raise ValueError(f"bad port range {lo}-{hi}")
    span = hi - lo + 1
    first = zlib.crc32(f"{job_id}/{attempt}".encode()) % span
    for step in range(span):
        port = lo + (first + step) % span
        if port not in taken:
            return port
    return lo + first  # every port is taken: share one (the range is too small for the cluster)


@dataclass(frozen=True, slots=True)
class GangInfo:
    """What one part of a gang is told about the whole (the Assignment's gang fields)."""

    node_rank: int
    nnodes: int
    world_size: int  # all the gang's GPUs
    master_addr: str
    master_port: int

    def env(self, local_gpus: int) -> tuple[tuple[str, str], ...]:
        """The variables ``torchrun`` and common launchers read (docs/gangs.md, the env table)."""
        common = {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "WORLD_SIZE": str(self.world_size),
            "NNODES": str(self.nnodes),
            "NODE_RANK": str(self.node_rank),
            "LOCAL_WORLD_SIZE": str(local_gpus),
        }
        pet = {
            "PET_NNODES": str(self.nnodes),
            "PET_NODE_RANK": str(self.node_rank),
            "PET_MASTER_ADDR": self.master_addr,
            "PET_MASTER_PORT": str(self.master_port),
            "PET_NPROC_PER_NODE": str(local_gpus),
        }
        return tuple({**common, **pet}.items())


_LABEL_MAX = 63  # a DNS label (RFC 1035), which a Docker network alias must be to resolve
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def rendezvous_alias(job_id: str, attempt: int) -> str:
    """The DNS name of a gang attempt's rank-0 part on a named container network: deterministic
    from ``(job_id, attempt)``, a valid DNS label (lowercase letters, digits, inner '-'; at most
    63), and different for every attempt. It reads ``horus-<job>-a<attempt>-r0`` where the job id
    allows; an id that had to be changed to fit (case, other characters, length) also gets a
    checksum of the original, so two job ids never share a name."""
    if attempt < 0:
        raise ValueError(f"attempt must not be negative, got {attempt}")
    slug = _NOT_ALNUM.sub("-", job_id.lower()).strip("-")
    tail = [f"a{attempt}", "r0"]
    if slug != job_id or len(slug) > _room(tail):
        tail.insert(0, f"{zlib.crc32(job_id.encode()):08x}")
    slug = slug[: max(_room(tail), 0)].rstrip("-")
    return "-".join(["horus", *([slug] if slug else []), *tail])


def _room(tail: Sequence[str]) -> int:
    return _LABEL_MAX - len("horus") - sum(len(t) + 1 for t in tail) - 1
