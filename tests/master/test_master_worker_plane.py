"""The worker stream protocol (docs/protocol.md) with a fake worker over real gRPC."""

from __future__ import annotations

import asyncio
import pathlib
import sqlite3
from typing import Any

import grpc
import pytest
from master_fakes import WAIT_S, FakeWorker, running_master, spec

from horus_core.errors import PermissionDenied
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.testing import FakeClock
from master.app import Master
from master.services.workers import Registration


async def submit(stub: cgrpc.HorusServiceAsyncStub, **kw: Any) -> pb.Job:
    return (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(**kw)))).job


async def watch(stub: cgrpc.HorusServiceAsyncStub, job_id: str) -> Any:
    call = stub.WatchJobs(cpb.WatchJobsRequest(job_id=job_id))
    await call.initial_metadata()
    return call


async def until_state(call: Any, state: int) -> pb.Job:
    async with asyncio.timeout(WAIT_S):
        while True:
            ev = await call.read()
            assert isinstance(ev, pb.JobEvent), "watch ended"
            if ev.job.state == state:
                return ev.job


@pytest.fixture
async def worker(master: Master) -> Any:
    w = FakeWorker(master.port, "node-a", n_gpus=2)
    yield w
    await w.close()


async def start_running(stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker, **kw: Any) -> wpb.Assignment:
    job = await submit(stub, **kw)
    call = await watch(stub, job.id)
    a = await worker.recv_kind("assign")
    assert a.job_id == job.id
    await worker.update(a.job_id, a.attempt, pb.JOB_STATE_RUNNING)
    await until_state(call, pb.JOB_STATE_RUNNING)
    call.cancel()
    return a


async def test_register_assign_run_logs_succeed(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    reg = await worker.connect()
    assert reg.heartbeat_interval_s == 2.0 and reg.lease_s == 20.0
    nodes = (await stub.ListNodes(cpb.ListNodesRequest())).nodes
    assert [(n.name, n.state, len(n.gpus)) for n in nodes] == [("node-a", pb.NODE_STATE_READY, 2)]
    assert (await stub.GetClusterInfo(cpb.GetClusterInfoRequest())).max_gpus_per_node == 2

    job = await submit(stub, name="hello")
    a = await worker.recv_kind("assign")
    assert (a.job_id, a.attempt, list(a.gpus)) == (job.id, 1, ["GPU-node-a-0"])
    assert a.spec.name == "hello"
    assigned = await stub.GetJob(cpb.GetJobRequest(job_id=job.id))  # sent only after the commit
    assert (assigned.state, assigned.node, assigned.attempt) == (pb.JOB_STATE_ASSIGNED, "node-a", 1)
    call = await watch(stub, job.id)

    await worker.update(job.id, 1, pb.JOB_STATE_RUNNING)
    await until_state(call, pb.JOB_STATE_RUNNING)
    await worker.log(job.id, 1, 0, b"hello ")
    await worker.log(job.id, 1, 0, b"hello ")  # duplicate: dropped
    await worker.log(job.id, 1, 99, b"gap")  # not at the end: dropped
    await worker.log(job.id, 1, 6, b"world\n")
    await worker.update(job.id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    done = await until_state(call, pb.JOB_STATE_SUCCEEDED)
    assert done.exit_code == 0 and done.HasField("finished_at")
    await worker.update(job.id, 1, pb.JOB_STATE_FAILED, exit_code=3)  # a late, different final: ignored

    chunks = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job.id))]
    assert b"".join(c.data for c in chunks) == b"hello world\n" and chunks[0].attempt == 1
    tail = [c async for c in stub.GetLogs(cpb.GetLogsRequest(job_id=job.id, attempt=1, offset=6))]
    assert b"".join(c.data for c in tail) == b"world\n"
    got = await stub.GetJob(cpb.GetJobRequest(job_id=job.id))
    assert got.state == pb.JOB_STATE_SUCCEEDED and got.exit_code == 0
    path = master.config.logs_dir / job.id / "1.log"
    assert path.read_bytes() == b"hello world\n"
    with sqlite3.connect(master.config.db_path) as conn:
        events = conn.execute(
            "SELECT from_state, to_state, attempt, node, reason FROM job_events WHERE job_id = ? ORDER BY id",
            (job.id,),
        ).fetchall()
    assert events == [
        (None, "PENDING", 0, "", "submitted"),
        ("PENDING", "ASSIGNED", 1, "node-a", "assigned to node-a"),
        ("ASSIGNED", "RUNNING", 1, "node-a", "running on node-a"),
        ("RUNNING", "SUCCEEDED", 1, "node-a", "succeeded"),
    ]


async def test_follow_logs_until_attempt_ends(stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    follow = stub.GetLogs(cpb.GetLogsRequest(job_id=a.job_id, follow=True))
    await worker.log(a.job_id, 1, 0, b"line 1\n")
    async with asyncio.timeout(WAIT_S):
        first = await follow.read()
    assert first.data == b"line 1\n"
    await worker.log(a.job_id, 1, 7, b"line 2\n")
    await worker.update(a.job_id, 1, pb.JOB_STATE_FAILED, exit_code=1)
    rest = []
    async with asyncio.timeout(WAIT_S):
        while isinstance(c := await follow.read(), cpb.LogChunk):
            rest.append(c.data)
    assert b"".join(rest) == b"line 2\n"
    assert await follow.code() is grpc.StatusCode.OK


async def test_unknown_running_attempt_is_killed_on_register(
    stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect(running=(("abcdef012345", 3),))
    kill = await worker.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == ("abcdef012345", 3)


async def test_lost_running_attempt_is_requeued_with_next_attempt(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    await worker.close()  # the worker restarts and forgot its attempt
    again = FakeWorker(master.port, "node-a", n_gpus=2, resume_epoch=worker.epoch)
    call = await watch(stub, a.job_id)
    await again.connect(running=())  # neither running nor finished: lost at once
    pending = await until_state(call, pb.JOB_STATE_PENDING)
    assert pending.reason == "attempt 1 lost: not running on node-a when it registered"
    second = await again.recv_kind("assign")
    assert (second.job_id, second.attempt) == (a.job_id, 2)
    # The worker's late final for attempt 1 is ignored: attempt 2 is current.
    await again.update(a.job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await again.update(a.job_id, 2, pb.JOB_STATE_RUNNING)
    running = await until_state(call, pb.JOB_STATE_RUNNING)
    assert running.attempt == 2
    await again.close()


async def test_final_in_registration_wins_over_lost(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    await worker.close()  # the attempt finishes while the stream is down...
    again = FakeWorker(master.port, "node-a", n_gpus=2, resume_epoch=worker.epoch)
    final = wpb.AttemptUpdate(job_id=a.job_id, attempt=1, state=pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await again.connect(running=(), finished=(final,))  # ...so its final comes with the registration
    await again.heartbeat()
    await again.barrier()
    got = await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))
    assert (got.state, got.attempt, got.exit_code) == (pb.JOB_STATE_SUCCEEDED, 1, 0)
    assert again.skipped == []  # never re-assigned
    await again.close()


async def test_unreported_assignment_is_never_sent_twice(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    running = await start_running(stub, worker)
    job = await submit(stub)
    first = await worker.recv_kind("assign")  # sent once while connected...
    await worker.close()
    again = FakeWorker(master.port, "node-a", n_gpus=2, resume_epoch=worker.epoch)
    await again.connect(running=((running.job_id, running.attempt),))
    # ...the worker does not report it, so that attempt is lost and the job gets a NEW attempt.
    nxt = await again.recv_kind("assign")
    assert (nxt.job_id, nxt.attempt) == (job.id, first.attempt + 1)
    got = await stub.GetJob(cpb.GetJobRequest(job_id=running.job_id))
    assert got.state == pb.JOB_STATE_RUNNING and got.attempt == 1  # the reported one is kept
    await again.close()


async def test_lease_is_renewed_only_in_answer_to_a_heartbeat(
    master: Master, clock: FakeClock, worker: FakeWorker
) -> None:
    reg = await worker.connect()
    assert reg.epoch != 0 and reg.kill_grace_s == master.core.config.kill_grace
    clock.advance(3 * master.core.config.heartbeat_s)
    await master.plane.check_liveness()  # time alone renews nothing (a one-way partition)...
    await worker.heartbeat(seq=41)
    renewal = await worker.recv()  # ...the first message after it is the answer to the heartbeat
    assert renewal.WhichOneof("msg") == "registered"
    assert (renewal.registered.renews_seq, renewal.registered.lease_s) == (41, master.core.config.lease_s)


async def test_unacknowledged_assignment_is_taken_back_and_fenced(
    master: Master, clock: FakeClock, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    """A worker that heartbeats but never acknowledges an assignment (a black hole) loses it after
    ack_timeout_s: the job is re-queued and the attempt killed in case it arrives late."""
    await worker.connect()
    job = await submit(stub)
    a = await worker.recv_kind("assign")
    ack = master.core.config.ack_timeout_s
    assert ack < master.core.config.node_timeout_s * 2
    for _ in range(int(ack // 5)):
        clock.advance(5)
        await worker.heartbeat(seq=1)  # alive, but the attempt is not among what it runs
        await worker.barrier()
        await master.plane.check_liveness()
    assert (await stub.GetJob(cpb.GetJobRequest(job_id=job.id))).state == pb.JOB_STATE_ASSIGNED
    call = await watch(stub, job.id)
    clock.advance(5)
    await worker.heartbeat(seq=2)
    await worker.barrier()
    await master.plane.check_liveness()
    pending = await until_state(call, pb.JOB_STATE_PENDING)
    assert "not acknowledged" in pending.reason
    # (The scheduler loop's own liveness check may be the one that took it back, while the test
    # waited on its barrier: expect() finds the Kill and the new Assignment there too.)
    kill = await worker.expect("kill", job.id)
    assert (kill.job_id, kill.attempt) == (a.job_id, a.attempt)
    assert (await worker.expect("assign", job.id)).attempt == a.attempt + 1  # placed again


async def test_nothing_is_placed_on_a_fenced_worker_until_it_says_otherwise(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    await worker.heartbeat(seq=1, fenced=True)
    await worker.barrier()
    job = await submit(stub)
    await master.scheduler.run_once()
    await worker.barrier()
    got = await stub.GetJob(cpb.GetJobRequest(job_id=job.id))
    assert got.state == pb.JOB_STATE_PENDING and not master.core.registry.schedulable()
    await worker.heartbeat(seq=2)  # renewed: takes work again
    a = await worker.recv_kind("assign")
    assert a.job_id == job.id


async def test_acknowledged_assignment_is_kept(
    master: Master, clock: FakeClock, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    job = await submit(stub)
    a = await worker.recv_kind("assign")
    for seq in range(1, int(master.core.config.ack_timeout_s // 5) + 2):
        clock.advance(5)  # in steps shorter than the node timeout: the node stays alive
        await worker.heartbeat(running=((a.job_id, a.attempt),), seq=seq)  # still starting (an image pull)
        await worker.barrier()
        await master.plane.check_liveness()
    got = await stub.GetJob(cpb.GetJobRequest(job_id=job.id))
    assert (got.state, got.attempt) == (pb.JOB_STATE_ASSIGNED, 1)


async def test_a_second_stream_cannot_finish_another_nodes_attempt(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    other = FakeWorker(master.port, "node-b", n_gpus=2)
    await other.connect()
    await other.update(a.job_id, a.attempt, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await other.barrier()
    assert (await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))).state == pb.JOB_STATE_RUNNING
    await other.close()


async def test_a_newcomer_under_a_dead_nodes_name_cannot_finish_its_attempt(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    """Without the node's epoch, a stream that takes the name gets its claims killed and the
    node's attempts re-queued: its finals, its RUNNING claim and its later SUCCEEDED count for nothing."""
    await worker.connect()
    a = await start_running(stub, worker)
    await worker.crash()
    call = await watch(stub, a.job_id)
    intruder = FakeWorker(master.port, "node-a", n_gpus=2)
    final = wpb.AttemptUpdate(job_id=a.job_id, attempt=1, state=pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await intruder.connect(running=((a.job_id, 1),), finished=(final,))
    kill = await intruder.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (a.job_id, 1)
    await until_state(call, pb.JOB_STATE_PENDING)
    await intruder.update(a.job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await intruder.barrier()
    got = await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))
    assert got.state in (pb.JOB_STATE_PENDING, pb.JOB_STATE_ASSIGNED)  # re-queued, never SUCCEEDED
    await intruder.close()


async def test_stale_attempt_reported_is_killed(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    await worker.update(a.job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await worker.heartbeat(running=((a.job_id, 1),))  # claims it still runs a finished attempt
    kill = await worker.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (a.job_id, 1)
    await worker.update(a.job_id, 7, pb.JOB_STATE_RUNNING)  # an attempt that never existed
    kill = await worker.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (a.job_id, 7)


async def test_node_timeout_requeues_and_closes_stream(
    master: Master, clock: FakeClock, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    clock.advance(29)
    await master.plane.check_liveness()
    assert (await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))).state == pb.JOB_STATE_RUNNING
    call = await watch(stub, a.job_id)
    clock.advance(2)
    await master.plane.check_liveness()
    job = await until_state(call, pb.JOB_STATE_PENDING)
    assert job.reason == "attempt 1 lost: node node-a lost"
    nodes = (await stub.ListNodes(cpb.ListNodesRequest())).nodes
    assert nodes[0].state == pb.NODE_STATE_LOST
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async with asyncio.timeout(WAIT_S):
            while True:  # lease renewals may come first; then the stream ends
                msg = await worker.call.read()
                assert msg.WhichOneof("msg") == "registered", msg
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    # It comes back: READY again, and its old attempt (if it still ran one) is killed.
    again = FakeWorker(master.port, "node-a", n_gpus=2, resume_epoch=worker.epoch)
    await again.connect(running=((a.job_id, 1),))
    kill = await again.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (a.job_id, 1)
    assert (await again.recv_kind("assign")).attempt == 2
    await again.close()


async def test_a_name_held_by_a_live_node_of_another_identity_is_refused(
    master: Master, worker: FakeWorker
) -> None:
    await worker.connect()  # anonymous (no credential configured in this test master)
    await worker.close()  # disconnected, not yet LOST
    taker = Registration("node-a", (), (), identity="cert:mallory")
    with pytest.raises(PermissionDenied):
        await master.plane.register(taker)
    assert master.core.registry.get("node-a").identity == "anonymous"  # type: ignore[union-attr]


async def test_heartbeats_keep_a_node_alive(
    master: Master, clock: FakeClock, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    for _ in range(4):
        clock.advance(10)
        await worker.heartbeat(
            running=((a.job_id, 1),),
            gpus=[pb.GpuStats(uuid="GPU-node-a-0", util_sm=55.0, mem_used_mib=1000, healthy=True)],
            jobs=[
                pb.JobGpuStats(
                    job_id=a.job_id, attempt=1, gpu_uuid="GPU-node-a-0", util_sm=50.0, mem_used_mib=900
                )
            ],
        )
        await worker.barrier()
        await master.plane.check_liveness()
    assert (await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))).state == pb.JOB_STATE_RUNNING
    gpus = {g.gpu.uuid: g for g in (await stub.ListGpus(cpb.ListGpusRequest())).gpus}
    g0 = gpus["GPU-node-a-0"]
    assert g0.stats.util_sm == 55.0 and list(g0.job_ids) == [a.job_id] and g0.jobs[0].util_sm == 50.0
    assert list(gpus["GPU-node-a-1"].job_ids) == []


async def test_cancel_running_waits_for_worker(stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    job = await stub.CancelJob(cpb.CancelJobRequest(job_id=a.job_id, reason="stop it"))
    assert job.state == pb.JOB_STATE_RUNNING and job.reason == "cancelling: stop it"
    kill = await worker.recv_kind("kill")
    assert (kill.job_id, kill.attempt) == (a.job_id, 1)
    call = await watch(stub, a.job_id)
    await worker.update(a.job_id, 1, pb.JOB_STATE_CANCELLED)
    done = await until_state(call, pb.JOB_STATE_CANCELLED)
    assert done.reason == "stop it"


async def test_cancel_on_lost_node_is_immediate(
    master: Master, clock: FakeClock, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker)
    await stub.CancelJob(cpb.CancelJobRequest(job_id=a.job_id))  # Kill sent, no answer
    clock.advance(31)
    await master.plane.check_liveness()
    got = await stub.GetJob(cpb.GetJobRequest(job_id=a.job_id))
    assert got.state == pb.JOB_STATE_CANCELLED


async def test_registration_errors(master: Master, stub: cgrpc.HorusServiceAsyncStub) -> None:
    w = FakeWorker(master.port, "node-a")
    await w.connect()
    dup = FakeWorker(master.port, "node-a")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await dup.connect()
    assert err.value.code() is grpc.StatusCode.ALREADY_EXISTS
    bad = FakeWorker(master.port, "bad name!")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await bad.connect()
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    first_not_register = FakeWorker(master.port, "node-b")
    first_not_register.channel = grpc.aio.insecure_channel(f"127.0.0.1:{master.port}")
    from horus_core.gen import worker_pb2_grpc as wgrpc

    first_not_register.call = wgrpc.WorkerServiceStub(first_not_register.channel).Connect()  # type: ignore[misc]
    await first_not_register.send(heartbeat=wpb.Heartbeat())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await first_not_register.recv()
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    for x in (w, dup, bad, first_not_register):
        await x.close()
    # a job too large for every node is refused once nodes are known
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await submit(stub, gpus=3)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "gpus" in (err.value.details() or "")


async def test_join_token(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, join_token="s3cret") as m:
        bad = FakeWorker(m.port, "node-a", token="wrong")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await bad.connect()
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        good = FakeWorker(m.port, "node-a", token="s3cret")
        await good.connect()
        await bad.close()
        await good.close()


async def test_profiles_learned_from_solo_attempt(
    master: Master, stub: cgrpc.HorusServiceAsyncStub, worker: FakeWorker
) -> None:
    await worker.connect()
    a = await start_running(stub, worker, job_type="ResNet-18 (batch size 32)")
    for util in (40.0, 60.0):
        await worker.heartbeat(
            running=((a.job_id, 1),),
            jobs=[
                pb.JobGpuStats(
                    job_id=a.job_id, attempt=1, gpu_uuid=a.gpus[0], util_sm=util, mem_used_mib=2000
                )
            ],
        )
    await worker.send(progress=wpb.AttemptProgress(job_id=a.job_id, attempt=1, step=100, loss=0.5))
    await worker.update(a.job_id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
    await worker.barrier()  # the final update, and the learning it triggers, are done
    profiles = (await stub.ListProfiles(cpb.ListProfilesRequest())).profiles
    assert len(profiles) == 1
    p = profiles[0]
    assert (p.job_type, p.util_avg, p.util_peak, p.mem_mib, p.samples) == (
        "ResNet-18 (batch size 32)",
        50.0,
        60.0,
        2000,
        2,
    )
