"""Horus: an interference-aware GPU cluster manager for deep-learning jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from horus_core.client import HorusClient, SyncHorusClient


def __getattr__(name: str) -> Any:
    # Lazy: the pure core (policies, simulator) must import without grpc.
    if name in ("HorusClient", "SyncHorusClient"):
        from horus_core import client

        return getattr(client, name)
    raise AttributeError(name)


__all__ = ["HorusClient", "SyncHorusClient", "__version__"]
