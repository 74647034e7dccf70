"""Several masters (``--master a:50051,b:50051,c:50051``): which one a client talks to, and
following a standby's answer to the leader (docs/ha.md)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import cast

import grpc
import grpc.aio

from horus_core.address import split_addresses

LEADER_KEY = "horus-leader"  # trailing metadata of a standby's answer (master/ha.py)
# Every master listed refused the connection for this long: the client gives up, naming them all
# (a failover keeps answering: the standbys do, as standbys; issue 39).
ALL_DOWN_S = 2.0


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
        self._down: dict[str, str] = {}  # the masters that did not answer since one did: why
        self._down_since: float | None = None

    def begin(self) -> None:
        """A new call: no master is known to be down yet."""
        self._down.clear()
        self._down_since = None

    def all_down(self, for_s: float = ALL_DOWN_S) -> str | None:
        """The error to give up with when every master known refused for ``for_s`` (monotonic
        seconds since the first refusal of the call); None while one may still answer."""
        since = self._down_since
        if since is None or any(m not in self._down for m in self.known):
            return None
        if time.monotonic() - since < for_s:
            return None
        return "no Horus master answers: " + ", ".join(f"{m} ({self._down[m]})" for m in self.known)

    def after(self, exc: grpc.aio.AioRpcError) -> bool:
        """Move on after a failed call: to the leader a standby named, else to the next master.
        True when a standby answered (nothing was done there: any call may be sent again)."""
        hint = leader_hint(exc)
        if hint is None and exc.code() is grpc.StatusCode.UNAVAILABLE:  # (no server answered)
            self._down[self.current] = _why(exc)
            if self._down_since is None:
                self._down_since = time.monotonic()
        else:
            self.begin()
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


def _why(exc: grpc.aio.AioRpcError) -> str:
    """A refused call's reason, short: gRPC's details name the address and say it at length."""
    details = " ".join((exc.details() or "").split())
    for short in ("Connection refused", "No route to host", "Connection reset", "Name or service not known"):
        if short.lower() in details.lower():
            return short.lower()
    return details[:100] or "unavailable"
