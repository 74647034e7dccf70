"""Nodes out of service through a real master (real gRPC, real SQLite, a worker speaking the real
stream protocol): cordon/drain/uncordon, GPU quarantine, their persistence across a restart,
reason codes and queue positions, and the event-loop lag on /metrics (docs/nodes.md)."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import grpc
import pytest
from master_fakes import WAIT_S, FakeWorker, bearer, client_for, running_master, token_file
from test_master_loopmon import FakeLoop
from test_metrics import scrape

from horus_core import reasoncodes as rc
from horus_core.client import HorusClient
from horus_core.errors import InvalidArgument, NotFound
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.model import NodeState
from horus_core.testing import FakeClock
from master.app import Master
from master.loopmon import LoopMonitor
from tests.pgtest import Db

CORDON, DRAIN, UNCORDON = (
    cpb.NODE_SERVICE_ACTION_CORDON,
    cpb.NODE_SERVICE_ACTION_DRAIN,
    cpb.NODE_SERVICE_ACTION_UNCORDON,
)


async def node(stub: Any, name: str) -> pb.Node:
    nodes = (await stub.ListNodes(cpb.ListNodesRequest())).nodes
    found: pb.Node = next(n for n in nodes if n.name == name)
    return found


def quarantined(n: pb.Node) -> dict[str, str]:
    return {g.uuid: g.quarantine for g in n.gpus if g.quarantine}


async def submit(stub: Any, name: str) -> str:
    req = cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1, name=name))
    job_id: str = (await stub.SubmitJob(req)).job.id
    return job_id


async def ecc(w: FakeWorker, uuid: str, count: int, xids: tuple[int, ...] = ()) -> None:
    await w.heartbeat(gpus=[pb.GpuStats(uuid=uuid, ecc_errors=count, xid_events=xids, healthy=True)])
    await w.barrier()


async def test_cordon_and_quarantine_outlive_a_master_restart(tmp_path: pathlib.Path, db: Db) -> None:
    url = db.target if db.pg else ""  # (on both backends)
    async with running_master(tmp_path, db_url=url) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="n1", action=CORDON))
        await ecc(w, w.gpus[1].uuid, 2)
        await ecc(w, w.gpus[0].uuid, 0, xids=(13,))  # an application's own Xid: not the GPU's fault
        before = await node(stub, "n1")
        assert before.state == pb.NODE_STATE_CORDONED
        assert quarantined(before) == {w.gpus[1].uuid: "2 new uncorrected ECC error(s)"}
        await w.close()
    async with running_master(tmp_path, db_url=url) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        after = await node(stub, "n1")
        assert after.state == pb.NODE_STATE_CORDONED and quarantined(after) == quarantined(before)
        back = await stub.SetNodeService(cpb.SetNodeServiceRequest(node="n1", action=UNCORDON))
        assert back.node.state == pb.NODE_STATE_READY and quarantined(back.node) == {}
        await ecc(w, w.gpus[1].uuid, 2)  # the same cumulative count: nothing new
        assert quarantined(await node(stub, "n1")) == {}
        await ecc(w, w.gpus[1].uuid, 3, xids=(79,))
        assert quarantined(await node(stub, "n1")) == {w.gpus[1].uuid: "Xid 79"}
        await w.close()


async def test_node_service_is_for_admins_and_bad_requests_change_nothing(tmp_path: pathlib.Path) -> None:
    tokens = token_file(tmp_path, "tok-alice alice", "tok-root root admin")
    alice, root = bearer("tok-alice"), bearer("tok-root")
    async with running_master(tmp_path, auth_tokens=tokens, join_token="jt") as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1, token="jt")
        await w.connect()

        async def refused(req: cpb.SetNodeServiceRequest, who: Any = root) -> grpc.StatusCode:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.SetNodeService(req, metadata=who)
            code: grpc.StatusCode = err.value.code()
            return code

        assert (
            await refused(cpb.SetNodeServiceRequest(node="n1", action=CORDON), alice)
            is grpc.StatusCode.PERMISSION_DENIED
        )
        assert (
            await refused(cpb.SetNodeServiceRequest(node="nope", action=CORDON)) is grpc.StatusCode.NOT_FOUND
        )
        bad = (
            cpb.SetNodeServiceRequest(node="n1", action=DRAIN, timeout_s=-1),
            cpb.SetNodeServiceRequest(node="n1", action=DRAIN, timeout_s=float("nan")),
            cpb.SetNodeServiceRequest(node="n1", action=CORDON, timeout_s=5),
            cpb.SetNodeServiceRequest(node="n1", action=CORDON, gpu_uuid=w.gpus[0].uuid),
            cpb.SetNodeServiceRequest(node="n1", action=UNCORDON, gpu_uuid="GPU-other"),
            cpb.SetNodeServiceRequest(node="n1"),
        )
        for req in bad:
            assert await refused(req) is grpc.StatusCode.INVALID_ARGUMENT, req
        listed = await stub.ListNodes(cpb.ListNodesRequest(), metadata=root)
        assert [n.state for n in listed.nodes] == [pb.NODE_STATE_READY]
        ok = await stub.SetNodeService(
            cpb.SetNodeServiceRequest(node="n1", action=DRAIN, timeout_s=60), metadata=root
        )
        assert ok.node.state == pb.NODE_STATE_DRAINING and ok.node.drain_deadline == pytest.approx(
            m.clock.now() + 60
        )
        await w.close()


async def test_drain_preempts_at_its_timeout_and_codes_say_why(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    async with running_master(tmp_path, clock=clock) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        first, second = await submit(stub, "first"), await submit(stub, "second")
        assert (await w.run_next()).job_id == first
        await m.scheduler.run_once()
        waiting = await stub.GetJob(cpb.GetJobRequest(job_id=second))
        assert (waiting.reason_code, waiting.queue_name, waiting.queue_position) == (
            "Resources",
            "default",
            1,
        )
        await stub.SetNodeService(cpb.SetNodeServiceRequest(node="n1", action=DRAIN, timeout_s=5))
        clock.advance(4)
        await m.scheduler.run_once()
        assert (await stub.GetJob(cpb.GetJobRequest(job_id=first))).state == pb.JOB_STATE_RUNNING
        clock.advance(2)
        await m.scheduler.run_once()
        kill = await w.recv_kind("kill")
        assert (kill.job_id, kill.attempt) == (first, 1)
        gone = await stub.GetJob(cpb.GetJobRequest(job_id=first))
        assert gone.state == pb.JOB_STATE_PENDING and gone.reason_code == "Preempted"
        await w.heartbeat()  # the attempt stopped
        await w.barrier()
        clock.advance(m.config.tick_s)  # (the no-node note is written at most once a tick)
        await m.scheduler.run_once()  # nothing else is schedulable: every job says why
        jobs = (await stub.ListJobs(cpb.ListJobsRequest(states=[pb.JOB_STATE_PENDING]))).jobs
        assert {j.reason_code for j in jobs} == {"NodeCordoned"}
        await w.close()


async def test_loop_lag_is_exported_to_prometheus(tmp_path: pathlib.Path) -> None:
    fake = FakeLoop([0.03, 0.002])
    mon = LoopMonitor(0.1, now=fake.now, sleep=fake.sleep)
    master = Master(config_for(tmp_path), clock=FakeClock(), monitor=mon, metrics_listen="127.0.0.1:0")
    async with master as m:
        async with asyncio.timeout(WAIT_S):
            await fake.idle.wait()
        got = await scrape(m.http.metrics_port)
    lag = {s.labels["quantile"]: s.value for s in got["horus_event_loop_lag_seconds"]}
    assert lag == pytest.approx({"0.5": 0.002, "0.99": 0.03, "1": 0.03})
    assert got["horus_event_loop_lag_samples_total"][0].value == 2
    assert got["horus_quarantined_gpus"][0].value == 0


async def test_pending_jobs_by_code_on_metrics(tmp_path: pathlib.Path) -> None:
    master = Master(config_for(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:0")
    async with master as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        for name in ("a", "b", "c"):
            await submit(stub, name)
        await w.run_next()
        await m.scheduler.run_once()
        codes = {
            s.labels["code"]: s.value
            for s in (await scrape(m.http.metrics_port))["horus_pending_jobs_by_code"]
        }
        assert set(codes) == set(rc.CODES) and codes["Resources"] == 2 and sum(codes.values()) == 2
        await w.close()


def config_for(tmp_path: pathlib.Path) -> Any:
    from master_fakes import config

    return config(tmp_path)


async def test_sdk_cordon_drain_uncordon(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    async with running_master(tmp_path, clock=clock) as m, HorusClient.connect(f"127.0.0.1:{m.port}") as c:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        assert (await c.cordon("n1")).state is NodeState.CORDONED
        drained = await c.drain("n1", timeout_s=90)
        assert drained.state is NodeState.DRAINING and drained.drain_deadline == pytest.approx(
            clock.now() + 90
        )
        assert (await c.drain("n1")).drain_deadline == pytest.approx(clock.now())  # at once
        back = await c.uncordon("n1")
        assert back.state is NodeState.READY and back.drain_deadline is None
        with pytest.raises(InvalidArgument):
            await c.drain("n1", timeout_s=-5)
        with pytest.raises(NotFound):
            await c.cordon("n9")
        assert [n.state for n in await c.nodes()] == [NodeState.READY]
        await w.close()


async def test_a_pilot_is_tagged_and_drains_itself(tmp_path: pathlib.Path) -> None:
    """A Slurm pilot (docs/slurm.md): its tag shows on the node; its DrainSelf drains it as
    ``hctl drain --timeout`` would, keeps an earlier deadline, and updates the tag's end."""
    clock = FakeClock()
    async with running_master(tmp_path, clock=clock) as m, HorusClient.connect(f"127.0.0.1:{m.port}") as c:
        w = FakeWorker(m.port, "slurm-42", n_gpus=1)
        w.slurm = pb.SlurmTag(job_id="42", end_time=clock.now() + 600)
        await w.connect()
        plain = FakeWorker(m.port, "plain", n_gpus=1)
        await plain.connect()
        nodes = {n.name: n for n in await c.nodes()}
        assert nodes["slurm-42"].slurm is not None and nodes["slurm-42"].slurm.job_id == "42"
        assert nodes["slurm-42"].slurm.end_time == pytest.approx(clock.now() + 600)
        assert nodes["plain"].slurm is None
        await w.send(
            drain=wpb.DrainSelf(timeout_s=240, reason="Slurm job 42 ends soon", end_time=clock.now() + 300)
        )
        await w.barrier()
        n = next(n for n in await c.nodes() if n.name == "slurm-42")
        assert n.state is NodeState.DRAINING and n.drain_deadline == pytest.approx(clock.now() + 240)
        assert n.slurm is not None and n.slurm.end_time == pytest.approx(clock.now() + 300)
        await w.send(drain=wpb.DrainSelf(timeout_s=500))  # later than the deadline set: kept
        await w.send(drain=wpb.DrainSelf(timeout_s=float("nan")))  # not a number: at once
        await w.barrier()
        n = next(n for n in await c.nodes() if n.name == "slurm-42")
        assert n.drain_deadline == pytest.approx(clock.now())
        assert next(n for n in await c.nodes() if n.name == "plain").state is NodeState.READY
        await w.close()
        await plain.close()
