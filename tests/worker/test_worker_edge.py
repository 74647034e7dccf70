"""Protobuf ends at the worker's edge (worker/messages.py, worker/connection.py): what the master
sends is read into horus_core.plane types before the agent sees it, the same objects the
master's side (horus_core.wire.to_worker_pb) started from."""

from __future__ import annotations

import pytest

from horus_core import wire
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import JobSpec
from horus_core.plane import Assignment, Kill, LeaseGrant, ToWorker
from worker import messages

SENT: list[ToWorker] = [
    LeaseGrant(2.0, 30.0, epoch=5, renews_seq=9, kill_grace_s=4.0),
    LeaseGrant(1.0, 20.0),
    Assignment("j1", 3, JobSpec(("train", "--lr", "0.1"), gpus=2, job_type="t"), ("GPU-1", "GPU-2")),
    Assignment(
        "g",
        1,
        JobSpec(("x",), gpus=16),
        ("GPU-3",) * 8,
        node_rank=1,
        nnodes=2,
        world_size=16,
        master_addr="10.0.0.1",
        master_port=29500,
    ),
    Kill("j1", 3, "stale"),
    Kill("j2", 1),
]


@pytest.mark.parametrize("sent", SENT, ids=lambda m: type(m).__name__)
def test_what_the_master_sends_arrives_as_the_plane_type_it_was(sent: ToWorker) -> None:
    assert messages.from_master(wire.to_worker_pb(sent)) == sent


def test_a_kind_the_worker_does_not_know_is_none() -> None:
    assert messages.from_master(wpb.MasterMessage()) is None
