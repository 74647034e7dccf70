"""Interference prediction: job profiles and the speed of jobs sharing one GPU.

Pure: no grpc, protobuf, sqlite or NVML. The public surface is pinned by a test.
"""

from __future__ import annotations

from horus_core.interference.model import InterferenceModel, default_model
from horus_core.interference.signature import JobProfile

__all__ = ["InterferenceModel", "JobProfile", "default_model"]
