"""A simulator round's snapshot from its pending and running jobs, each kept in index order
(:class:`horus_core.inorder.InOrder`, numbered by the jobs' indices, the order of the live jobs a
snapshot lists) as they change: a round hands them to the policy as the snapshot's split, with
each job's number and version, as the master's live index does, so neither the snapshot nor a
policy's job table walks every live job to find them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from horus_core.inorder import InOrder
from horus_core.model import ClusterSnapshot, Job, JobChanges, Node

I64 = NDArray[np.int64]
Handout = Callable[[I64, I64], JobChanges]  # (numbers, versions) -> the round's changes


def split_snapshot(
    nodes: tuple[Node, ...], live: dict[str, Job], waiting: InOrder, running: InOrder, handout: Handout
) -> ClusterSnapshot:
    """The round's snapshot of ``live`` (every live job's view, in index order): its pending
    jobs are ``waiting``'s, its active and running ones ``running``'s."""
    pending, active = waiting.jobs(), running.jobs()
    numbers = np.concatenate((waiting.numbers(), running.numbers()))
    versions = np.concatenate((waiting.versions(), running.versions()))
    split = {"pending": pending, "active": active, "running": active}
    return ClusterSnapshot.split_as(nodes, tuple(live.values()), split, handout(numbers, versions))
