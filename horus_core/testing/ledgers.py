"""A policy's ledgers driven alone in tests: the ledger with the book a policy keeps for it."""

from __future__ import annotations

from typing import Any

from horus_core.model import ClusterSnapshot
from horus_core.policies.attained import Attained
from horus_core.policies.state import Book, PassState


class LasLedger:
    """An attained-service ledger (``Attained(**kw)``) and its policy's book: :meth:`observe`
    is a pass's ``begin`` of a policy that keeps only this ledger."""

    def __init__(self, **kw: Any) -> None:
        self.las = Attained(**kw)
        self.book = Book()

    def observe(self, snapshot: ClusterSnapshot, now: float) -> PassState:
        state = PassState.begin(snapshot, now, self.book)
        self.las.observe(state)
        return state
