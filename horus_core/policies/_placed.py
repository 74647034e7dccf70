"""A pending job as a view of the snapshot shows it once this pass placed it (the gang started on
its reservation, the jobs an earlier type tier assigned): ASSIGNED on its GPUs.

``(job id, version)`` names one state of one job, and the packer's caches trust it (a placed
job's GPUs are kept per version). Such a view is not a state the store ever gave the job, and
two passes may place the same job version on different GPUs, so each view gets a version of
its own, negative (a stored version is never negative) and never given twice, from -2 down
(-1 is what the job table's slots hold for "none").
"""

from __future__ import annotations

import dataclasses
import itertools

from horus_core.model import Job, JobState

_VIEWS = itertools.count(2)  # (``next`` on it is atomic: decide may run in a thread)


def placed_view(job: Job, node: str, gpus: tuple[str, ...]) -> Job:
    """``job`` ASSIGNED to ``gpus`` (on ``node``), at a version no other job state has."""
    return dataclasses.replace(job, state=JobState.ASSIGNED, node=node, gpus=gpus, version=-next(_VIEWS))
