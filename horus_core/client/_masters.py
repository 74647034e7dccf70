"""Several masters (``--master a:50051,b:50051,c:50051``): which one a client talks to, and
following a standby's answer to the leader (docs/ha.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import grpc.aio

from horus_core.address import split_addresses

LEADER_KEY = "horus-leader"  # trailing metadata of a standby's answer (master/ha.py)


def split_targets(target: str) -> tuple[str, ...]:
    """``"a:1, b"`` -> ``("a:1", "b:50051")``: at least one, each with the default port where it
    names none (:func:`horus_core.address.split_addresses`); ValueError says what is wrong."""
    return split_addresses(target)


def leader_hint(exc: grpc.aio.AioRpcError) -> str | None:
    """The leader's address a standby answered with ("" when it knows none); None: the answer did
    not come from a standby."""
    try:
        md = exc.trailing_metadata()
    except Exception:  # (no metadata on a call that never reached a server)
        return None
    for key, value in cast("Iterable[tuple[str, str | bytes]]", md or ()):
        if key == LEADER_KEY:
            return value if isinstance(value, str) else value.decode()
    return None


class Masters:
    """The masters a client knows and the one it talks to now."""

    def __init__(self, target: str) -> None:
        self.known = list(split_targets(target))
        self.current = self.known[0]

    def after(self, exc: grpc.aio.AioRpcError) -> bool:
        """Move on after a failed call: to the leader a standby named, else to the next master.
        True when a standby answered (nothing was done there: any call may be sent again)."""
        hint = leader_hint(exc)
        if hint:
            if hint not in self.known:
                self.known.append(hint)
            self.current = hint
        else:
            self.rotate()
        return hint is not None

    def rotate(self) -> None:
        """To the next master listed (one that did not answer: maybe it is down)."""
        if len(self.known) > 1:
            self.current = self.known[(self.known.index(self.current) + 1) % len(self.known)]
