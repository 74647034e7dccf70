"""The master's hot paths under load (bench/load.py) give the same answers as the plain ones."""

from __future__ import annotations

import asyncio
import gc

from master_fakes import FakeWorker, client_for, spec

from horus_core import wire
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import Gpu, NodeState
from horus_core.plane import GpuReading, Heartbeat, Kill
from master import gctune
from master.api.views import NodeViews
from master.app import Master
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.scheduler import SLOW_PASS_S, rest_after
from master.services.session import Session
from master.store.rows import JobRow


def entry(n_gpus: int = 3) -> NodeEntry:
    gpus = tuple(Gpu(f"GPU-{i}", "n1", i, "Tesla V100", 16_384, healthy=i != 2) for i in range(n_gpus))
    return NodeEntry("n1", gpus, NodeState.READY, last_heard=5.0)


def test_node_model_follows_gpu_health_and_reuses_unchanged_gpus() -> None:
    e = entry()
    first = e.model()
    assert [g.healthy for g in first.gpus] == [True, True, False]  # as registered
    e.gpu_stats = {"GPU-0": pb.GpuStats(uuid="GPU-0", healthy=True)}
    e.last_heard = 7.0
    again = e.model()
    assert again.last_seen == 7.0 and again.gpus is first.gpus  # nothing to rebuild
    assert e.model() is again  # nor a new Node while nothing changed
    e.state = NodeState.LOST
    assert e.model().state is NodeState.LOST
    e.state = NodeState.READY
    e.gpu_stats = {
        "GPU-0": pb.GpuStats(uuid="GPU-0", healthy=False),
        "GPU-2": pb.GpuStats(uuid="GPU-2", healthy=True),
    }
    sick = e.model()
    assert [g.healthy for g in sick.gpus] == [False, True, False]  # a registered-bad GPU stays bad
    assert sick.gpus[1] is first.gpus[1]
    e.gpu_stats = {"GPU-0": pb.GpuStats(uuid="GPU-0", healthy=True)}
    assert [g.healthy for g in e.model().gpus] == [True, True, False]  # recovered
    e.gpus = e.gpus[:2]  # a new GPU list is never served from the memo of the old one
    assert len(e.model().gpus) == 2


async def test_heartbeats_read_active_jobs_from_the_live_index_never_the_store(master: Master) -> None:
    reads: list[str | None] = []
    plain = master.core.store.read.active_jobs

    async def counted(node: str | None = None) -> list[JobRow]:
        reads.append(node)
        return await plain(node)

    master.core.store.read.active_jobs = counted  # type: ignore[method-assign]
    w = FakeWorker(master.port, "n1")

    def kills() -> list[tuple[str, int]]:
        return [(m.kill.job_id, m.kill.attempt) for m in w.skipped if m.WhichOneof("msg") == "kill"]

    async with client_for(master) as stub:
        await w.connect()
        await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))
        a = await w.recv_kind("assign")
        await w.update(a.job_id, a.attempt, pb.JOB_STATE_RUNNING)
        reads.clear()
        for _ in range(3):
            await w.heartbeat(running=((a.job_id, a.attempt),))
        await w.barrier()
        assert reads == [] and kills() == []  # no read for three heartbeats; the attempt is current

        await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec()))  # a second job joins n1 ...
        b = await w.recv_kind("assign")
        await w.heartbeat(running=((a.job_id, a.attempt), (b.job_id, b.attempt)))
        await w.barrier()
        assert kills() == []  # ... and is current without a read

        await w.update(a.job_id, a.attempt, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.heartbeat(running=((a.job_id, a.attempt), (b.job_id, b.attempt)))  # a ended: fenced now
        await w.barrier()
        assert kills() == [(a.job_id, a.attempt)]
        assert reads == []
        assert [r.job.id for r in master.core.live.active_on("n1")] == [r.job.id for r in await plain("n1")]
    await w.close()


def test_a_slow_pass_is_followed_by_as_long_a_rest_at_most_a_tick() -> None:
    assert rest_after(0.001, 1.0) == 0.0 and rest_after(SLOW_PASS_S / 2, 1.0) == 0.0  # fast: at once
    assert rest_after(0.3, 1.0) == 0.3
    assert rest_after(5.0, 1.0) == 1.0


def kill(i: int) -> Kill:
    return Kill(job_id=f"j{i}", attempt=1)


async def test_a_session_hands_its_messages_in_order_and_wakes_its_sender() -> None:
    s = Session("n1", maxsize=3)
    assert s.send(kill(1)) and s.send(kill(2))
    assert [(await s.next()), (await s.next())] == [kill(1), kill(2)]
    waiting = asyncio.ensure_future(s.next())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing queued: the sender waits ...
    s.send(kill(3))
    assert await waiting == kill(3)  # ... until a message comes
    waiting = asyncio.ensure_future(s.next())
    await asyncio.sleep(0)
    s.close("bye")
    assert await waiting is None and s.closed and not s.send(kill(4))  # close wakes it with None


async def test_a_session_whose_worker_does_not_read_is_closed() -> None:
    s = Session("n1", maxsize=2)
    assert s.send(kill(1)) and s.send(kill(2))
    assert not s.send(kill(3))
    assert s.closed and "send queue full" in s.close_reason
    assert await s.next() is None


def test_heartbeat_health_changes_reach_the_node_model_and_max_gpus_follows_put() -> None:
    reg = NodeRegistry()
    e = entry()
    reg.put(e)
    first = reg.schedulable()
    assert first == () and reg.max_gpus_per_node() == 3  # no stream: nothing schedulable
    model = e.model()

    def hb(healthy: bool) -> Heartbeat:
        return Heartbeat(gpus=(GpuReading(uuid="GPU-1", healthy=healthy),))

    reg.record_heartbeat(e, hb(True), now=6.0)  # same health: same GPU objects
    assert e.model().gpus is model.gpus and e.model().last_seen == 6.0
    reg.record_heartbeat(e, hb(False), now=7.0)  # the stats dict changes in place
    assert [g.healthy for g in e.model().gpus] == [True, False, False]
    reg.record_heartbeat(e, hb(True), now=8.0)
    assert [g.healthy for g in e.model().gpus] == [True, True, False]
    big = NodeEntry("n0", tuple(Gpu(f"G{i}", "n0", i, "V100", 1) for i in range(8)), NodeState.READY, 0.0)
    reg.put(big)
    assert reg.max_gpus_per_node() == 8 and [x.name for x in reg.all()] == ["n0", "n1"]


def test_node_views_match_a_fresh_conversion_as_nodes_change() -> None:
    views, e = NodeViews(), entry()
    first = views.node(e.model())
    assert first == wire.node_to_pb(e.model())
    e.last_heard = 9.0  # a heartbeat: same GPUs, new last_seen
    assert views.node(e.model()) is first and first.last_seen == 9.0
    e.gpu_stats = {"GPU-0": GpuReading(uuid="GPU-0", healthy=False)}
    e.state = NodeState.LOST
    changed = views.node(e.model())
    assert changed == wire.node_to_pb(e.model())
    assert [g.healthy for g in changed.gpus] == [False, True, False] and changed.state == pb.NODE_STATE_LOST


def test_startup_objects_leave_the_collectors_full_passes() -> None:
    before, thresholds = gc.get_freeze_count(), gc.get_threshold()
    kept = {"a live row": [1, 2, 3]}
    try:
        frozen = gctune.tune()
        assert frozen == gc.get_freeze_count() > before
        assert not any(o is kept for o in gc.get_objects(generation=2))  # a full pass skips it
        assert gc.get_threshold() == (gctune.YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
