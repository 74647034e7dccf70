"""What tests (and benchmarks) share: a clock that moves only when told, model factories and
queue configurations.

Nothing in the daemons imports this module. The factories build ``horus_core.model`` objects
with the fields a test usually varies; everything else keeps the model's defaults.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import itertools
import json
import pathlib
import tomllib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from horus_core.model import Assign, Gpu, Job, JobSpec, JobState, Node, NodeState

if TYPE_CHECKING:  # imported where used: FakeClock's users need no policy code
    from horus_core.queues.config import QueueConfig

V100 = ("Tesla V100-SXM2-16GB", 16160, "v100")  # model name, memory (MiB), GPU type


class FakeClock:
    """A clock that moves only when :meth:`advance` is called; sleepers wake when their time
    comes. Both daemons' clocks: the master's (``now``, ``sleep``) and the worker's
    (``monotonic``, ``time``: the same reading)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)


def gpu(node: str, index: int, *, healthy: bool = True, mem: int = V100[1]) -> Gpu:
    """A V100 named ``{node}g{index}``."""
    return Gpu(f"{node}g{index}", node, index, V100[0], mem, V100[2], healthy)


def nodes(
    n: int = 1, per: int = 1, *, mem: int = V100[1], state: NodeState = NodeState.READY
) -> tuple[Node, ...]:
    """``n`` nodes ``n0``, ``n1``, ... of ``per`` V100s each."""
    return tuple(Node(f"n{i}", tuple(gpu(f"n{i}", k, mem=mem) for k in range(per)), state) for i in range(n))


def pending(
    jid: str,
    job_type: str = "",
    gpus: int = 1,
    at: float = 0.0,
    *,
    exclusive: bool = False,
    total_steps: int = 0,
) -> Job:
    spec = JobSpec(("train",), gpus=gpus, job_type=job_type, exclusive=exclusive, total_steps=total_steps)
    return Job(jid, spec, JobState.PENDING, submitted_at=at)


def running(
    jid: str, job_type: str, gpu_uuids: tuple[str, ...], node: str = "n0", *, exclusive: bool = False
) -> Job:
    """Attempt 1 of a job on ``gpu_uuids`` (one change after its submission: version 1)."""
    job = pending(jid, job_type, gpus=len(gpu_uuids), exclusive=exclusive)
    return dataclasses.replace(
        job, state=JobState.RUNNING, node=node, gpus=gpu_uuids, attempt=1, started_at=0.0, version=1
    )


def placed(job: Job, assign: Assign, now: float) -> Job:
    """``job`` as the master records ``assign``: its next attempt runs there from ``now`` (one
    change more: the version policies' caches key on)."""
    return dataclasses.replace(
        job,
        state=JobState.RUNNING,
        node=assign.node,
        gpus=assign.gpus,
        attempt=job.attempt + 1,
        started_at=now,
        version=job.version + 1,
    )


def requeued(job: Job, reason_code: str = "") -> Job:
    """``job`` pending again after a preemption (one change more)."""
    return dataclasses.replace(
        job, state=JobState.PENDING, node="", gpus=(), reason_code=reason_code, version=job.version + 1
    )


# ---------------------------------------------------------------------------- queues.toml

PRIORITY_CLASSES = """
[classes.low]
level = 0
[classes.normal]
level = 100
default = true
[classes.high]
level = 1000
preempt = true
"""
"""Three priority classes: ``low``, ``normal`` (the default) and ``high`` (may preempt)."""


def _inline(table: Mapping[str, int | float]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)} = {v}" for k, v in table.items()) + "}"


def queue_table(
    name: str,
    nominal: Mapping[str, int],
    *,
    borrowing_limit: int = 0,
    users: Sequence[str] = (),
    weights: Mapping[str, float] | None = None,
) -> str:
    """The TOML of one ``[queues.NAME]`` table (``users`` empty: anyone may submit)."""
    lines = [f"[queues.{name}]", f"nominal = {_inline(nominal)}", f"borrowing_limit = {borrowing_limit}"]
    if users:
        lines.append(f"users = {json.dumps(list(users))}")
    if weights:
        lines.append(f"weights = {_inline(weights)}")
    return "\n".join(lines) + "\n"


def queues_toml(*tables: str, classes: bool = True, half_life_s: float | None = None) -> str:
    """A queues.toml: ``half_life_s`` (if given), :data:`PRIORITY_CLASSES` (if ``classes``), then
    the ``tables`` (from :func:`queue_table`)."""
    head = f"half_life_s = {half_life_s}\n" if half_life_s is not None else ""
    return head + (PRIORITY_CLASSES if classes else "") + "".join(tables)


def queue_config(text: str) -> QueueConfig:
    """``text`` parsed as the master parses a queues.toml."""
    from horus_core.queues.config import parse_config

    return parse_config(tomllib.loads(text))


def queue_file(directory: pathlib.Path, text: str) -> pathlib.Path:
    """``text`` written to ``directory/queues.toml``: a file for ``--queues``."""
    path = directory / "queues.toml"
    path.write_text(text)
    return path
