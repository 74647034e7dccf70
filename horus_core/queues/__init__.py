"""Queues, quotas, fair share and priority preemption for every policy (issue 13, docs/queues.md)."""

from __future__ import annotations

from horus_core.queues.config import PriorityClass, Queue, QueueConfig, load_config, parse_config
from horus_core.queues.ledger import WAIT_PRIORITY, WAIT_QUOTA, WAIT_RECLAIM
from horus_core.queues.policy import QueuedPolicy

__all__ = [
    "WAIT_PRIORITY",
    "WAIT_QUOTA",
    "WAIT_RECLAIM",
    "PriorityClass",
    "Queue",
    "QueueConfig",
    "QueuedPolicy",
    "load_config",
    "parse_config",
]
