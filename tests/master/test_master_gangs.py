"""Multi-node gangs in the master (issue 11): one Assignment per node part, the job RUNNING once
every part runs and SUCCEEDED once every part did, a failed or lost part stopping the others and
re-queuing the job once, the next attempt held until the old parts stopped, a log per part."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from master_fakes import FakeWorker, client_for, running_master

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.testing import FakeClock
from master.api.worker import peer_host
from master.app import Master


@pytest.fixture
async def pair(master: Master) -> AsyncIterator[tuple[FakeWorker, FakeWorker]]:
    a, b = FakeWorker(master.port, "node-a"), FakeWorker(master.port, "node-b")
    await a.connect()
    await b.connect()
    yield a, b
    await a.close()
    await b.close()


async def _job(stub: cgrpc.HorusServiceAsyncStub, job_id: str) -> pb.Job:
    return await stub.GetJob(cpb.GetJobRequest(job_id=job_id))


async def _gang(stub: cgrpc.HorusServiceAsyncStub, a: FakeWorker, b: FakeWorker) -> tuple[str, Any, Any]:
    job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=4)))).job
    pa, pb_ = await a.recv_kind("assign"), await b.recv_kind("assign")
    return job.id, pa, pb_


async def _running(stub: cgrpc.HorusServiceAsyncStub, a: FakeWorker, b: FakeWorker) -> tuple[str, Any, Any]:
    job_id, pa, pb_ = await _gang(stub, a, b)
    for w, p in ((a, pa), (b, pb_)):
        await w.update(job_id, p.attempt, pb.JOB_STATE_RUNNING)
        await w.barrier()
    return job_id, pa, pb_


async def test_each_part_gets_its_gpus_and_rank_and_the_job_runs_once_both_do(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, b = pair
    job_id, pa, pb_ = await _gang(stub, a, b)
    assert list(pa.gpus) == ["GPU-node-a-0", "GPU-node-a-1"] and list(pb_.gpus) == [
        "GPU-node-b-0",
        "GPU-node-b-1",
    ]
    assert (pa.node_rank, pb_.node_rank, pa.nnodes, pb_.nnodes) == (0, 1, 2, 2)
    assert pa.world_size == pb_.world_size == 4 and pa.attempt == pb_.attempt == 1
    assert pa.master_addr == pb_.master_addr == "127.0.0.1"  # rank 0's address as the master saw it
    assert pa.master_port == pb_.master_port and 29500 <= pa.master_port <= 29999
    job = await _job(stub, job_id)
    assert (job.node, list(job.nodes), len(job.gpus)) == ("node-a", ["node-a", "node-b"], 4)

    await a.update(job_id, 1, pb.JOB_STATE_RUNNING)
    await a.barrier()
    assert (await _job(stub, job_id)).state == pb.JOB_STATE_ASSIGNED  # not every part runs yet
    await b.update(job_id, 1, pb.JOB_STATE_RUNNING)
    await b.barrier()
    assert (await _job(stub, job_id)).state == pb.JOB_STATE_RUNNING

    await a.log(job_id, 1, 0, b"from a\n")
    await b.log(job_id, 1, 0, b"from b\n")
    await a.update(job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await a.barrier()
    assert (await _job(stub, job_id)).state == pb.JOB_STATE_RUNNING  # node-b's part still runs
    await b.update(job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await b.barrier()
    done = await _job(stub, job_id)
    assert (done.state, done.attempt) == (pb.JOB_STATE_SUCCEEDED, 1)

    chunks = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job_id))]
    assert sorted((c.node, c.data) for c in chunks) == [("node-a", b"from a\n"), ("node-b", b"from b\n")]
    only_b = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job_id, node="node-b"))]
    assert [(c.node, c.data) for c in only_b] == [("node-b", b"from b\n")]
    with pytest.raises(Exception, match="no part on 'node-c'"):
        _ = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job_id, node="node-c"))]


async def test_a_failed_part_stops_the_other_and_the_next_attempt_waits_until_it_stopped(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    await b.update(job_id, 1, pb.JOB_STATE_FAILED, exit_code=1)
    kill = await a.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (job_id, 1)
    job = await _job(stub, job_id)
    assert (job.state, job.attempt) == (pb.JOB_STATE_PENDING, 1)
    assert "part 1 on node-b failed (exit code 1)" in job.reason

    await a.heartbeat(running=((job_id, 1),))  # node-a's part still stops
    await a.barrier()
    await master.scheduler.run_once()
    await a.barrier()
    assert not [m for m in a.skipped if m.WhichOneof("msg") == "assign"]
    assert (await _job(stub, job_id)).attempt == 1

    await a.heartbeat()  # stopped: the next attempt may start, on both nodes
    await a.update(job_id, 1, pb.JOB_STATE_CANCELLED)
    await a.barrier()
    await master.scheduler.run_once()
    pa, pb_ = await a.recv_kind("assign"), await b.recv_kind("assign")
    assert (pa.job_id, pa.attempt, pb_.attempt) == (job_id, 2, 2)


async def test_the_stopped_parts_final_update_lets_the_next_gang_attempt_start(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    """The last part's final update (its process ended) frees the next attempt at once: no
    heartbeat without it, no pass asked for by the test."""
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    await b.update(job_id, 1, pb.JOB_STATE_FAILED, exit_code=1)
    assert (await a.recv_kind("kill")).job_id == job_id
    await a.heartbeat(running=((job_id, 1),))  # node-a's part still stops
    await a.barrier()
    await master.scheduler.run_once()
    assert (await _job(stub, job_id)).attempt == 1
    await a.update(job_id, 1, pb.JOB_STATE_CANCELLED)  # ... and now it ended
    pa, pb_ = await a.expect("assign", job_id), await b.expect("assign", job_id)
    assert (pa.attempt, pb_.attempt) == (2, 2)


async def test_a_part_still_stopping_holds_its_nodes_gpus_after_the_other_part_ended(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    """A cancelled gang whose rank-0 part ended while node-b's part is still stopping: node-a's
    GPUs are free again, node-b's are offered to no one until that part reports its end."""
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    await stub.CancelJob(cpb.CancelJobRequest(job_id=job_id, reason="enough"))
    await a.expect("kill", job_id)
    await b.expect("kill", job_id)
    await a.update(job_id, 1, pb.JOB_STATE_CANCELLED)  # rank 0 ended ...
    await a.barrier()
    await b.heartbeat(running=((job_id, 1),))  # ... node-b's part still checkpoints
    await b.barrier()
    assert (await _job(stub, job_id)).state == pb.JOB_STATE_CANCELLED

    two = pb.JobSpec(command=["x"], gpus=2)
    x = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=two))).job.id
    y = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=two))).job.id
    await master.scheduler.run_once()
    placed = await a.expect("assign", x)
    assert list(placed.gpus) == ["GPU-node-a-0", "GPU-node-a-1"]
    await b.barrier()
    assert not [m for m in b.skipped if m.WhichOneof("msg") == "assign"]
    assert (await _job(stub, y)).state == pb.JOB_STATE_PENDING

    await b.update(job_id, 1, pb.JOB_STATE_CANCELLED)  # node-b's part ended: its GPUs are free
    placed = await b.expect("assign", y)
    assert list(placed.gpus) == ["GPU-node-b-0", "GPU-node-b-1"]


async def test_a_lost_node_requeues_the_gang_once_and_kills_the_other_part(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, clock: FakeClock, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    await b.crash()
    for _ in range(8):  # in steps shorter than the node timeout: node-a stays alive
        clock.advance(5)
        await a.heartbeat(running=((job_id, 1),))
        await a.barrier()
        await master.plane.check_liveness()
    kills = [m.kill for m in a.skipped if m.WhichOneof("msg") == "kill" and m.kill.job_id == job_id]
    if not kills:  # (the tick's liveness check may still be committing: wait for its Kill)
        kills = [await a.recv_kind("kill")]
    assert [(k.job_id, k.attempt) for k in kills[:1]] == [(job_id, 1)]
    job = await _job(stub, job_id)
    assert (job.state, job.attempt) == (pb.JOB_STATE_PENDING, 1)
    nodes = {n.name: n.state for n in (await stub.ListNodes(cpb.ListNodesRequest())).nodes}
    assert nodes == {"node-a": pb.NODE_STATE_READY, "node-b": pb.NODE_STATE_LOST}


async def test_a_cancelled_gang_stops_every_part(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    await stub.CancelJob(cpb.CancelJobRequest(job_id=job_id, reason="enough"))
    ka, kb = await a.recv_kind("kill"), await b.recv_kind("kill")
    assert (ka.job_id, kb.job_id, ka.attempt, kb.attempt) == (job_id, job_id, 1, 1)
    await b.update(job_id, 1, pb.JOB_STATE_CANCELLED)
    await b.barrier()
    assert (await _job(stub, job_id)).state == pb.JOB_STATE_CANCELLED


async def test_rank_0s_advertised_address_is_the_gangs_master_addr(
    master: Master, stub: cgrpc.HorusServiceAsyncStub
) -> None:
    a, b = FakeWorker(master.port, "node-a"), FakeWorker(master.port, "node-b")
    a.advertise_addr = "10.9.8.7"
    await a.connect()
    await b.connect()
    try:
        _, pa, pb_ = await _gang(stub, a, b)
        assert pa.master_addr == pb_.master_addr == "10.9.8.7"
    finally:
        await a.close()
        await b.close()


async def test_a_bad_advertised_address_is_refused(master: Master) -> None:
    w = FakeWorker(master.port, "node-x")
    w.advertise_addr = "not an address; rm -rf /"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await w.connect()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "advertise_addr" in str(
        err.value.details()
    )
    await w.close()


async def test_a_restarted_master_keeps_each_parts_state(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        a, b = FakeWorker(m.port, "node-a"), FakeWorker(m.port, "node-b")
        await a.connect()
        await b.connect()
        job_id, _, _ = await _running(stub, a, b)
        await a.update(job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)  # rank 0 done before the restart
        await a.barrier()
        await a.crash()
        await b.crash()
    async with running_master(tmp_path, FakeClock()) as m, client_for(m) as stub:
        a, b = FakeWorker(m.port, "node-a"), FakeWorker(m.port, "node-b")
        await a.connect()  # runs nothing any more: its part ended, which must not re-queue the gang
        await b.connect(running=((job_id, 1),))
        await b.update(job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await b.barrier()
        await a.barrier()
        assert not [msg for msg in a.skipped + b.skipped if msg.WhichOneof("msg") in ("kill", "assign")]
        done = await _job(stub, job_id)
        assert (done.state, done.attempt, list(done.nodes)) == (
            pb.JOB_STATE_SUCCEEDED,
            1,
            ["node-a", "node-b"],
        )
        await a.close()
        await b.close()


def test_the_peer_address_read_from_grpc() -> None:
    assert peer_host("ipv4:10.0.0.5:4321") == "10.0.0.5"
    assert peer_host("ipv6:[::1]:4321") == "::1"
    assert peer_host("unix:/run/x.sock") == "" and peer_host("ipv4:bad host:1") == ""


async def test_following_a_gangs_logs_reads_every_part_until_the_attempt_ends(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, b = pair
    job_id, _, _ = await _running(stub, a, b)
    call = stub.GetLogs(cpb.GetLogsRequest(job_id=job_id, follow=True))
    await a.log(job_id, 1, 0, b"a1\n")
    first = await call.read()
    assert (first.node, first.data, first.offset) == ("node-a", b"a1\n", 0)
    await b.log(job_id, 1, 0, b"b1\n")  # node-b's first output: its part's log appears meanwhile
    second = await call.read()
    assert (second.node, second.data, second.offset) == ("node-b", b"b1\n", 0)
    await a.log(job_id, 1, 3, b"a2\n")
    third = await call.read()
    assert (third.node, third.data, third.offset) == ("node-a", b"a2\n", 3)
    for w in (a, b):
        await w.update(job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
    end = await call.read()  # the attempt is over: the stream ends
    assert end is grpc.aio.EOF


async def test_a_single_node_jobs_log_may_name_its_node(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, pair: tuple[FakeWorker, FakeWorker]
) -> None:
    a, _ = pair
    job = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1)))).job
    assign = await a.recv_kind("assign")
    assert assign.nnodes == 0 and assign.master_port == 0  # no gang fields for one node
    await a.log(job.id, 1, 0, b"solo\n")
    await a.barrier()
    chunks = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job.id, node="node-a"))]
    assert [(c.node, c.data) for c in chunks] == [("", b"solo\n")]
    with pytest.raises(grpc.aio.AioRpcError, match="no part on 'node-b'"):
        _ = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job.id, node="node-b"))]
