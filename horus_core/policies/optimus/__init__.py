"""Optimus (EuroSys 2018) for elastic jobs: loss-curve and speed fits, marginal GPU allocation,
placement; the policy object is :class:`OptimusPolicy` (``make`` builds it for the registry)."""

from horus_core.policies.optimus.policy import OptimusPolicy, make

__all__ = ["OptimusPolicy", "make"]
