"""What a policy's own stages see and are: the contract between a policy and the driver.

A policy's module writes its stages only: an object with a ``name`` and ``serve(tier)``, the
actions (order, place, preempt) for one :class:`Tier`, a part of the pass: the cluster as the
tier shows it (GPUs of other tiers hidden, jobs placed earlier in the pass shown running) and
the pending jobs it serves. The driver (:mod:`horus_core.policies.staged`, with the tiers: GPU
types, the head gang's reservation, the queues) makes the tiers and calls ``serve`` on each; a
policy's module never imports it (``drive(stages)`` there makes the policy).
"""

from __future__ import annotations

from typing import Protocol

from horus_core.model import Action, ClusterSnapshot, Job
from horus_core.packing.cluster import ClusterLayout


class Tier(Protocol):
    """One tier of a pass, as a stage reads it (:class:`horus_core.policies.views.View` is one)."""

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The tier as a snapshot: its nodes (hidden GPUs marked unhealthy) and jobs."""
        ...

    @property
    def layout(self) -> ClusterLayout:
        """The pass's GPU layout without the tier's hidden GPUs."""
        ...

    def pending(self) -> tuple[Job, ...]:
        """The pending jobs the tier serves."""
        ...

    def active(self) -> tuple[Job, ...]:
        """The active jobs (those placed earlier in the pass among them)."""
        ...


class Serving(Protocol):
    """A policy's own stages: what ``drive`` turns into a policy."""

    @property
    def name(self) -> str: ...

    def serve(self, tier: Tier, /) -> list[Action]: ...
