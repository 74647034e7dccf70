"""What a starting master rebuilds from the store for its policy: the jobs' progress journals
(replayed to a policy that fits them, optimus) and the attained service that the least-attained
order of ``horus`` / ``horus+`` ranks by, and the queues' fair-share usage (decayed GPU-time per
user and queue) that orders the pending jobs within a queue."""

from __future__ import annotations

import logging

from horus_core.policies import Policy
from horus_core.policies.pack import PackingPolicy
from horus_core.queues import QueuedPolicy
from horus_core.queues.fairshare import Span
from master.clock import Clock
from master.services.progress import ProgressKeeper
from master.store.progress import attained_service
from master.store.reads import Reader
from master.store.spans import UsageSpan, running_spans

log = logging.getLogger(__name__)


def ledger_of(policy: Policy) -> PackingPolicy | None:
    """The policy that keeps an attained-service ledger, if any (``horus``, ``horus+``)."""
    inner = (
        policy.inner if isinstance(policy, QueuedPolicy) else policy
    )  # queues wrap the policy that keeps it
    return inner if isinstance(inner, PackingPolicy) and inner.las is not None else None


def fair_spans(policy: QueuedPolicy, spans: list[UsageSpan]) -> list[Span]:
    """The spans keyed as the fair share keys usage: (the job's queue, its owner)."""
    queue_of = policy.config.queue_of
    return [((queue_of(s.owner, s.queue), s.owner), s.gpus, s.start, s.end) for s in spans]


async def restore_policy_state(
    policy: Policy, *, read: Reader, clock: Clock, progress: ProgressKeeper | None
) -> None:
    """Before the first pass: load the progress journals, the attained service and the queues'
    fair-share usage (from the store's ``read``er, as of ``clock``'s now)."""
    if progress is not None:
        jobs = await progress.load()
        if jobs:
            log.info("progress: the journals of %d jobs loaded", jobs)
    keeper = ledger_of(policy)
    if keeper is not None:
        now = clock.now()
        service, running = await attained_service(read, now)
        keeper.restore(service, running, now)
        if service:
            log.info("attained service of %d jobs rebuilt from their attempts", len(service))
    if isinstance(policy, QueuedPolicy):
        spans = await running_spans(read)
        policy.fair.restore(fair_spans(policy, spans), clock.now())
        if spans:
            log.info("queues: fair-share usage rebuilt from %d attempt spans", len(spans))
