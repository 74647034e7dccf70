"""What a starting master rebuilds from the store for its policy: the jobs' progress journals
(replayed to a policy that fits them, optimus) and the attained service that the least-attained
order of ``horus`` / ``horus+`` ranks by."""

from __future__ import annotations

import logging

from horus_core.policies import Policy
from horus_core.policies.attained import Attained
from master.services.core import Core
from master.store.progress import attained_service

log = logging.getLogger(__name__)


def ledger_of(policy: Policy) -> Attained | None:
    """The policy's attained-service ledger, if it keeps one (``horus``, ``horus+``)."""
    las = getattr(policy, "las", None)
    return las if isinstance(las, Attained) else None


async def restore_policy_state(core: Core, policy: Policy) -> None:
    """Before the first pass: load the progress journals and the attained service."""
    if core.progress is not None:
        jobs = await core.progress.load()
        if jobs:
            log.info("progress: the journals of %d jobs loaded", jobs)
    las = ledger_of(policy)
    if las is not None:
        now = core.clock.now()
        service, running = await attained_service(core.store.read, now)
        las.restore(service, running, now)
        if service:
            log.info("attained service of %d jobs rebuilt from their attempts", len(service))
