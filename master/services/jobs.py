"""The client plane's job operations: submit, get, list, cancel, watch."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
from dataclasses import dataclass

from horus_core import reasoncodes as rc
from horus_core.advice import gpu_type_refusal, image_refusal, submit_warnings
from horus_core.errors import FailedPrecondition, InvalidArgument, NotFound
from horus_core.gang import is_gang
from horus_core.interference import InterferenceModel
from horus_core.interference.profiles import RESERVE_MIB
from horus_core.model import Job, JobSpec, JobState
from horus_core.validation import check_request_id, spec_size, strip_reserved_env, validate_spec
from master.clock import Clock
from master.config import MasterConfig
from master.services import transitions as tr
from master.services.access import Identity, check_job_access, owner_filter, owner_for
from master.services.core import Dispatcher, JobWriter, Wakeup
from master.services.events import EventBus, JobEvent, Subscription
from master.services.logs import JOB_ID
from master.services.nodes import NodeRegistry
from master.services.queues import QueueService
from master.store.jobs import SubmitResult, new_job_id, request_key
from master.store.reads import Reader
from master.store.rows import JobRow

log = logging.getLogger(__name__)

DEFAULT_PAGE = 100
MAX_PAGE = 1000
# A page's jobs (estimated from above) stay under this: with the largest spec validation accepts
# (horus_core.validation.MAX_SPEC_BYTES) a page is still below the 4 MiB message limit.
PAGE_BYTES = 3 * 1024 * 1024
MAX_REASON = 1000
_TOKEN_PREFIX = "p1."
KNOWN_SOURCES = ("table", "measured")  # a job type with a profile of its own


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    next_token: str


def check_job_id(job_id: str) -> str:
    if not job_id:
        raise InvalidArgument("job_id", "required")
    if not JOB_ID.match(job_id):
        raise InvalidArgument("job_id", f"not a job id: {job_id[:80]!r}")
    return job_id


def encode_page_token(seq: int) -> str:
    return _TOKEN_PREFIX + base64.urlsafe_b64encode(str(seq).encode()).decode().rstrip("=")


def decode_page_token(token: str) -> int:
    if not token:
        return 0
    try:
        if not token.startswith(_TOKEN_PREFIX) or len(token) > 64:
            raise ValueError(token)
        body = token[len(_TOKEN_PREFIX) :]
        seq = int(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("ascii"))
        if seq < 0:
            raise ValueError(token)
        return seq
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument("page_token", "not a token from an earlier ListJobs") from None


def approx_size(job: Job) -> int:
    """An upper estimate of the job's serialized size in bytes."""
    gpus = sum(len(g) + 8 for g in job.gpus)
    nodes = sum(len(n) + 8 for n in job.nodes)  # a gang's nodes
    return 512 + spec_size(job.spec) + gpus + nodes + len(job.id) + len(job.node) + 4 * len(job.reason)


class JobService:
    def __init__(
        self,
        *,
        config: MasterConfig,
        read: Reader,
        clock: Clock,
        registry: NodeRegistry,
        writer: JobWriter,
        dispatch: Dispatcher,
        wakeup: Wakeup,
        events: EventBus,
        queues: QueueService | None = None,
        model: InterferenceModel | None = None,
    ) -> None:
        self.config, self.read, self.clock, self.registry = config, read, clock, registry
        self.writer, self.dispatch, self.wakeup, self.events = writer, dispatch, wakeup, events
        self.queues = queues  # --queues: each job's queue and class are checked at submit
        self.model = model  # what the submit warnings call a known job type

    def known_job_types(self) -> list[str]:
        """The job types of the packaged table (the learned ones are in the store)."""
        return [] if self.model is None else self.model.known_job_types()

    def warnings(self, spec: JobSpec) -> list[str]:
        """What the submitter is told about an accepted job (horus_core.advice.submit_warnings)."""
        model = self.model
        if model is None:
            return submit_warnings(spec, lambda _: True, (), self.registry.gpu_types())

        def known(job_type: str) -> bool:
            return model.profile_of(job_type).source in KNOWN_SOURCES

        return submit_warnings(spec, known, model.known_job_types(), self.registry.gpu_types())

    async def submit(self, spec: JobSpec, request_id: str, caller: Identity | None) -> SubmitResult:
        check_request_id(request_id)
        owner = owner_for(caller, spec.owner)
        if spec.owner != owner:
            spec = dataclasses.replace(spec, owner=owner)
        max_gpus = self.registry.max_gpus_per_node()
        validate_spec(spec, max_gpus_per_node=max_gpus, allow_mounts=self.config.allow_mounts)
        total = self.registry.total_gpus()
        if total and spec.gpus > total:  # (a gang may span nodes, not exceed the cluster)
            raise InvalidArgument("gpus", f"asks for {spec.gpus} GPUs but the cluster has {total}")
        refused = image_refusal(spec, set(self.registry.runtimes().values()))
        if refused is not None:
            raise FailedPrecondition(refused)
        unknown = gpu_type_refusal(spec, self.registry.gpu_types())
        if unknown is not None:  # (as an impossible cap: it could never run)
            raise InvalidArgument("gpu_types", unknown)
        self._check_gpu_memory(spec)
        if self.queues is not None:
            spec = self.queues.check(spec)
        if spec.min_speed == 0.0 and self.config.min_speed > 0.0:  # the cluster default, stored
            spec = dataclasses.replace(spec, min_speed=self.config.min_speed)
        env = strip_reserved_env(spec.env)
        if env != spec.env:
            spec = dataclasses.replace(spec, env=env)
        now = self.clock.now()
        ready = self.registry.any_schedulable()
        reason = "waiting for a scheduling pass" if ready else "no ready nodes"
        code = rc.SUBMITTED if ready else rc.NO_READY_NODES
        job = Job(
            new_job_id(),
            spec,
            JobState.PENDING,
            submitted_at=now,
            updated_at=now,
            reason=reason,
            reason_code=code,
        )
        result = await self.writer.submit(job, request_key(owner, request_id) if request_id else None)
        if not result.created:
            return result
        self.events.publish(JobEvent(result.row.job, None, now, "submitted"))
        self.wakeup.poke()
        return result

    def _check_gpu_memory(self, spec: JobSpec) -> None:
        """A declared cap no GPU (of the types the job accepts) can hold, with the reserve the
        packing keeps free, is refused: the job could never be placed (docs/sharing.md)."""
        if spec.gpu_memory_mib <= 0:
            return
        largest = self.registry.largest_gpu_mib(spec.gpu_types)
        if largest is not None and spec.gpu_memory_mib > largest - RESERVE_MIB:
            kind = f" of type {','.join(spec.gpu_types)}" if spec.gpu_types else ""
            raise InvalidArgument(
                "gpu_memory",
                f"asks for {spec.gpu_memory_mib} MiB per GPU but the largest GPU{kind} in the cluster has "
                f"{largest} MiB, of which {largest - RESERVE_MIB} MiB may be given to jobs",
            )

    async def _row(self, job_id: str, caller: Identity | None) -> JobRow:
        row = await self.read.job(check_job_id(job_id))
        if row is None:
            raise NotFound(f"no job {job_id}")
        check_job_access(caller, row.job)
        return row

    def active(self) -> list[Job]:
        """The ASSIGNED and RUNNING jobs, from the live-job index (memory, as a pass reads them)."""
        return self.writer.live.active()

    async def get(self, job_id: str, caller: Identity | None) -> Job:
        """The job, with when and why an attempt of it was last stopped and the job re-queued."""
        job = (await self._row(job_id, caller)).job
        last = await self.read.last_requeue(job.id)
        if last is None:
            return job
        return dataclasses.replace(job, last_preempted_at=last[0], last_preemption=last[1])

    async def list(
        self,
        states: list[JobState],
        owner: str,
        page_size: int,
        page_token: str,
        caller: Identity | None,
        finished_within_s: float = 0.0,
    ) -> JobPage:
        if page_size < 0:
            raise InvalidArgument("page_size", "must not be negative")
        limit = min(page_size or DEFAULT_PAGE, MAX_PAGE)
        after = decode_page_token(page_token)
        since = self.clock.now() - finished_within_s if finished_within_s > 0 else None
        rows = await self.read.list_jobs(states, owner_filter(caller, owner), after, limit + 1, since)
        more = len(rows) > limit
        rows = rows[:limit]
        budget, kept = PAGE_BYTES, list[JobRow]()
        for r in rows:
            budget -= approx_size(r.job)
            if kept and budget < 0:
                more = True
                break
            kept.append(r)
        token = encode_page_token(kept[-1].seq) if more and kept else ""
        return JobPage([r.job for r in kept], token)

    async def cancel(self, job_id: str, reason: str, caller: Identity | None) -> Job:
        row = await self._row(job_id, caller)
        if row.job.state.terminal:
            raise FailedPrecondition(f"job {job_id} is already {row.job.state.value}")
        why = reason[:MAX_REASON] or f"cancelled by {caller.user if caller else 'a user'}"
        lost = self.registry.is_lost(row.job.node)
        changes = await self.writer.apply([(job_id, tr.cancel(why, self.clock.now(), node_lost=lost))])
        if not changes:
            now_row = await self._row(job_id, caller)
            if now_row.job.state.terminal:
                raise FailedPrecondition(f"job {job_id} is already {now_row.job.state.value}")
            return now_row.job  # a cancel is already under way
        after = changes[-1].after
        if after.cancel_requested and not is_gang(after.job):  # (a gang's parts: the dispatcher stops them)
            self.dispatch.kill(after.job.node, after.job.id, after.job.attempt, why)
        self.wakeup.poke()
        return after.job

    async def watch(self, job_id: str, caller: Identity | None) -> Subscription:
        if job_id:
            await self._row(job_id, caller)
        owner = caller.user if caller is not None and not caller.admin else None
        return self.events.subscribe(job_id or None, owner)
