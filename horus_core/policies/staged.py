"""A policy as stages over one pass state: begin (follow the snapshot), then run a view through
its tiers (GPU types, the gang reservation) to its own stages (order, place, preempt).

:class:`Stages` is what every policy here builds on. ``decide(snapshot, now)`` is
``run(begin(snapshot, now), View(state))``: :meth:`Stages.begin` brings the policy's
:class:`~horus_core.policies.state.Book` and ledgers up to the snapshot once, and
:meth:`Stages.run` is what a wrapper that admits jobs in tiers (the queues) calls once per tier
with a view of the same state. :meth:`Stages.serve` is the policy's own part: order, place and
preempt over one view. A policy written only as ``decide`` is served whole (:func:`staged`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.policies.base import Policy
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.stage import Serving
from horus_core.policies.state import Book, PassState
from horus_core.policies.views import View


@runtime_checkable
class Staged(Protocol):
    """A policy a wrapper may run tier by tier over one pass state."""

    name: str

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]: ...

    def begin(self, snapshot: ClusterSnapshot, now: float) -> PassState: ...

    def run(self, state: PassState, view: View) -> list[Action]: ...


class Stages:
    """The stages every policy here shares (see the module doc); a subclass gives ``name``,
    ``model``, ``gate`` and ``book`` and writes :meth:`serve` (and :meth:`observe` for ledgers
    of its own)."""

    name: str
    model: InterferenceModel
    gate: TypeGate
    book: Book

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        state = self.begin(snapshot, now)
        return self.run(state, View(state))

    def begin(self, snapshot: ClusterSnapshot, now: float) -> PassState:
        """The pass's state: the book follows the snapshot, then every ledger reads it once."""
        state = PassState.begin(snapshot, now, self.book)
        if self.gate.reserve is not None:
            self.gate.reserve.observe(state, self.model)
        self.observe(state)
        return state

    def observe(self, state: PassState) -> None:
        """Bring the policy's own ledgers up to the pass (none by default)."""

    def run(self, state: PassState, view: View) -> list[Action]:
        """The actions for ``view``: through the tiers to :meth:`serve`."""
        return self.gate.run(view, self.serve, self.model)

    def serve(self, view: View) -> list[Action]:
        """Order, place and preempt over one view: the policy's own stages."""
        raise NotImplementedError

    def restore(
        self, service: Mapping[str, float], running: Mapping[str, tuple[int, float]], now: float
    ) -> None:
        """Start from what a restarted master rebuilt: GPU-seconds attained per job and each
        running job's (attempt, start), so the first pass keeps their running stints."""
        self.book.restore(running)


@dataclass
class Placing(Stages):
    """A policy that places the pending jobs itself: a subclass gives ``name`` and writes
    :meth:`Stages.serve`. Its tiers: no job on a GPU type it cannot run on (the model's
    throughput 0, or the spec's ``gpu_types``) and the head gang's reservation."""

    name: str = "placing"
    # Read only for the GPU types a job cannot run on (throughput 0 in the table).
    model: InterferenceModel = field(default_factory=default_model, repr=False, compare=False)
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)
    book: Book = field(default_factory=Book, init=False, repr=False, compare=False)


class Driven(Placing):
    """A policy's own stages (:class:`~.stage.Serving`, written in its module without the tier
    machinery) driven through the tiers: what :func:`drive` makes."""

    def __init__(
        self, stages: Serving, gate: TypeGate | None = None, model: InterferenceModel | None = None
    ) -> None:
        super().__init__(stages.name, model or default_model(), gate or TypeGate())
        self.stages = stages

    def serve(self, view: View) -> list[Action]:
        return self.stages.serve(view)


def drive(stages: Serving, gate: TypeGate | None = None) -> Driven:
    """The policy whose own stages are ``stages``: its pending jobs through the GPU-type tiers and
    the head gang's reservation (``gate``; default: the types' rule and a reservation after an
    hour) to ``stages.serve``."""
    return Driven(stages, gate)


class Whole:
    """A policy written only as ``decide``, served whole: every view as a snapshot."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.name, self.book = policy, policy.name, Book()

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.policy.decide(snapshot, now)

    def begin(self, snapshot: ClusterSnapshot, now: float) -> PassState:
        return PassState.begin(snapshot, now, self.book)

    def run(self, state: PassState, view: View) -> list[Action]:
        return self.policy.decide(view.snapshot, state.now)


def staged(policy: Policy) -> Staged:
    """``policy`` as stages: itself, or served whole."""
    return policy if isinstance(policy, Staged) else Whole(policy)
