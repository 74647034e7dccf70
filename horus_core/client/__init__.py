"""The client SDK of the Horus master: :class:`HorusClient` (asyncio) and :class:`SyncHorusClient`.

Every call returns model types (:mod:`horus_core.model`) or the views defined here, never
protobuf messages, and fails with a :class:`horus_core.errors.HorusError` subclass.
"""

from __future__ import annotations

from horus_core.client._async import DEFAULT_PAGE_SIZE, DEFAULT_TARGET, HorusClient
from horus_core.client._masters import LEADER_KEY, Masters
from horus_core.client._rpc import RetryPolicy
from horus_core.client._sync import SyncHorusClient
from horus_core.client._tls import tls_credentials
from horus_core.client._views import (
    ClusterInfo,
    GpuStats,
    GpuStatus,
    JobEvent,
    JobGpuStats,
    JobPage,
    JobProgress,
    LatencySummary,
    LogChunk,
    PairSpeed,
    Profile,
    ProgressReport,
    ServerStats,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TARGET",
    "LEADER_KEY",
    "ClusterInfo",
    "GpuStats",
    "GpuStatus",
    "HorusClient",
    "JobEvent",
    "JobGpuStats",
    "JobPage",
    "JobProgress",
    "LatencySummary",
    "LogChunk",
    "Masters",
    "PairSpeed",
    "Profile",
    "ProgressReport",
    "RetryPolicy",
    "ServerStats",
    "SyncHorusClient",
    "tls_credentials",
]
