"""The interference learner: solo vs shared throughput -> stored pair speeds -> the model -> placement.

Pure tests of the classification and the per-attempt tracker, then the learner over a real SQLite
store with a fake clock, then the whole path through the worker stream (real gRPC).
"""

from __future__ import annotations

import math
import pathlib
import sqlite3
from collections.abc import AsyncIterator

import pytest
from master_fakes import FakeWorker, client_for, config, spec

from horus_core.caps import with_margin
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, NodeState, Wait
from horus_core.plane import AttemptProgress, Heartbeat, JobGpuReading
from horus_core.policies import make_policy
from horus_core.testing import FakeClock, running
from master.app import Master
from master.learning.learner import Learner
from master.learning.sharing import SOLO, RateTrack, Sharing, sharing_of
from master.store import Store
from tests.pgtest import Db

A = "ResNet-18 (batch size 32)"
B = "Recommendation (batch size 512)"  # the packaged table: A and B share a V100 at ~1.0x each
C = "ResNet-50 (batch size 64)"
SETTLE = 1.0
TYPES = {"g0": "v100", "g1": "v100", "k0": "k80"}


def job(jid: str, job_type: str, gpus: tuple[str, ...] = ("g0",)) -> Job:
    """Attempt 1 of a job running on node n1 (the shared factory)."""
    return running(jid, job_type, gpus, "n1")


def key(j: Job) -> tuple[str, int]:
    return (j.id, j.attempt)


def sig(j: Job) -> str:
    return j.spec.job_type


# ------------------------------------------------------------------------------ pure parts


def test_sharing_of_classifies_each_attempt() -> None:
    a, b, c = job("a", A), job("b", B), job("c", C, ("g1",))
    wide = job("w", A, ("g0", "g1"))
    states = sharing_of([a, b, c], {key(a), key(b), key(c)}, TYPES, sig)
    assert states[key(a)] == Sharing(A, B, frozenset({key(b)}), "v100", 1)
    assert states[key(b)].partner == A and states[key(c)].partner == SOLO
    # A two-GPU job with one co-runner on each GPU: one signature -> a pair; two -> unusable.
    two_b = job("b2", B, ("g1",))
    assert sharing_of([wide, b, two_b], {key(wide), key(b), key(two_b)}, TYPES, sig)[key(wide)].partner == B
    mixed = sharing_of([wide, b, c], {key(wide), key(b), key(c)}, TYPES, sig)
    assert mixed[key(wide)].partner is None and mixed[key(b)].partner == A
    # A triple on one GPU, a co-runner still starting (assigned, not running), mixed GPU types.
    b3 = job("b3", B)
    triple = sharing_of([a, b, b3], {key(a), key(b), key(b3)}, TYPES, sig)
    assert all(s.partner is None for s in triple.values())
    assert sharing_of([a, b], {key(a)}, TYPES, sig)[key(a)].partner is None
    assert key(b) not in sharing_of([a, b], {key(a)}, TYPES, sig)
    odd = job("o", A, ("g0", "k0"))
    assert sharing_of([odd], {key(odd)}, TYPES, sig)[key(odd)].partner is None
    assert sharing_of([a], {key(a)}, {}, sig)[key(a)].partner is None  # GPU type unknown
    assert sharing_of([a], {("a", 2)}, TYPES, sig) == {}  # another attempt runs there


def test_rate_track_files_only_settled_new_sane_reports() -> None:
    t = RateTrack()
    solo = Sharing(A, SOLO, frozenset(), "v100", 1)
    t.observe(solo, now=10.0)
    assert not t.add(1, 100.0, now=10.5, settle_s=SETTLE)  # not settled yet
    assert t.add(2, 100.0, now=11.0, settle_s=SETTLE)
    assert not t.add(2, 100.0, now=11.0, settle_s=SETTLE)  # the same report again
    for step, rate in ((3, math.nan), (4, -1.0), (5, 0.0), (6, math.inf), (7, 1e13)):
        assert not t.add(step, rate, now=12.0, settle_s=SETTLE)
    t.observe(solo, now=12.0)  # unchanged: still settled
    assert t.add(8, 100.0, now=12.0, settle_s=SETTLE)
    shared = Sharing(A, B, frozenset({("b", 1)}), "v100", 1)
    t.observe(shared, now=13.0)
    assert not t.add(9, 25.0, now=13.5, settle_s=SETTLE)
    assert t.add(10, 25.0, now=14.0, settle_s=SETTLE)
    t.forget(("b", 1))  # the co-runner ended: unknown until the next heartbeat shows the GPU
    assert not t.add(11, 25.0, now=15.0, settle_s=SETTLE)
    t.observe(Sharing(C, SOLO, frozenset(), "v100", 1), now=15.0)  # not this attempt's identity
    assert not t.add(12, 25.0, now=20.0, settle_s=SETTLE)
    assert t.solo_new == 2 and list(t.shared[B]) == [25.0]


def test_rate_track_keeps_shared_reports_until_it_has_a_reference() -> None:
    t = RateTrack(max_samples=4)
    t.observe(Sharing(B, A, frozenset({("a", 1)}), "v100", 1), now=0.0)
    for step in range(1, 7):
        t.add(step, 50.0 + step, now=5.0, settle_s=SETTLE)
    assert list(t.shared[A]) == [53.0, 54.0, 55.0, 56.0]  # bounded: the most recent
    assert t.take(3, final=False, solo_known=False) is None  # no reference yet: keep them
    t.observe(Sharing(B, SOLO, frozenset(), "v100", 1), now=10.0)
    for step in range(7, 10):
        t.add(step, 200.0, now=12.0, settle_s=SETTLE)
    rates = t.take(3, final=False, solo_known=False)
    assert rates is not None and rates.solo_rate == 200.0
    assert rates.pairs == ((A, 54.5, 200.0),) and t.shared == {}
    assert t.take(3, final=True, solo_known=False) is None  # nothing new since


# ------------------------------------------------------------------------------ the learner


@pytest.fixture
async def store(tmp_path: pathlib.Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "horus.db")
    yield s
    await s.close()


def learner(store: Store, clock: FakeClock, model: InterferenceModel) -> Learner:
    return Learner(store, clock, model, settle_s=SETTLE, checkpoint_s=60.0)


def progress(lr: Learner, j: Job, first_step: int, rates: list[float]) -> int:
    for i, rate in enumerate(rates):
        lr.on_progress(
            "n1", AttemptProgress(job_id=j.id, attempt=j.attempt, step=first_step + i, samples_per_s=rate)
        )
    return first_step + len(rates)


def place(lr: Learner, clock: FakeClock, *jobs: Job) -> None:
    """A heartbeat showing ``jobs`` running, then time for the reports to settle."""
    lr.on_placement("n1", list(jobs), {key(j) for j in jobs}, TYPES)
    clock.advance(SETTLE)


def rows(store_path: pathlib.Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(store_path) as conn:
        return list(conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3"))


async def learn_bad_pair(lr: Learner, clock: FakeClock) -> None:
    """A runs alone at 100/s, then next to B at 25/s and ends; B then runs alone at 200/s."""
    a, b = job("a", A), job("b", B)
    place(lr, clock, a)
    sa = progress(lr, a, 1, [100.0, 101.0, 99.0])
    lr.on_placement("n1", [a, b], {key(a)}, TYPES)  # B assigned, not started: A's reports do not count
    sa = progress(lr, a, sa, [60.0])
    place(lr, clock, a, b)
    sa = progress(lr, a, sa, [25.0, 25.0, 26.0, 24.0])
    sb = progress(lr, b, 1, [50.0, 50.0, 50.0])
    await lr.attempt_ended(a, 1)
    sb = progress(lr, b, sb, [190.0])  # A is gone but no heartbeat says so yet: not filed
    place(lr, clock, b)
    progress(lr, b, sb, [200.0, 200.0, 200.0])
    await lr.attempt_ended(b, 1)


async def test_pair_speeds_from_solo_and_shared_phases(tmp_path: pathlib.Path, store: Store) -> None:
    clock, model = FakeClock(), default_model()
    lr = learner(store, clock, model)
    assert model.pair_speeds(A, B, "v100") == pytest.approx((1.0, 1.0), abs=0.05)  # the table
    await learn_bad_pair(lr, clock)
    pairs = rows(tmp_path / "horus.db", "pair_speeds")
    assert [r[:5] for r in pairs] == [(B, A, "v100", 0.25, 1), (A, B, "v100", 0.25, 1)]
    solos = rows(tmp_path / "horus.db", "solo_throughputs")
    assert [(r[0], r[1], r[2], r[3]) for r in solos] == [(B, "v100", 1, 200.0), (A, "v100", 1, 100.0)]
    # Not yet: a policy may be reading the model right now.
    assert model.pair_speeds(A, B, "v100") == pytest.approx((1.0, 1.0), abs=0.05)
    assert lr.apply_observations() == 2
    assert model.pair_speeds(A, B, "v100") == pytest.approx((0.25, 0.25), abs=1e-3)


async def test_learned_solo_throughput_is_the_reference_of_later_attempts(
    tmp_path: pathlib.Path, store: Store
) -> None:
    clock, model = FakeClock(), default_model()
    lr = learner(store, clock, model)
    a1 = job("a", A)
    place(lr, clock, a1)
    progress(lr, a1, 1, [80.0, 80.0, 80.0])
    await lr.attempt_ended(a1, 1)
    # Attempt 2 of another A job only ever shares its GPU with C: no solo phase of its own.
    a2, c = job("a2", A, ("g1",)), job("c", C, ("g1",))
    place(lr, clock, a2, c)
    progress(lr, a2, 1, [40.0, 40.0, 40.0])
    progress(lr, c, 1, [30.0, 30.0, 30.0])
    await lr.attempt_ended(a2, 1)
    await lr.attempt_ended(c, 1)  # C had no reference at all: it teaches nothing
    assert [(r[0], r[1], r[3]) for r in rows(tmp_path / "horus.db", "pair_speeds")] == [(A, C, 0.5)]
    lr.apply_observations()
    speed_a, speed_c = model.pair_speeds(A, C, "v100")
    assert speed_a == pytest.approx(0.5, abs=1e-3)
    assert speed_c == pytest.approx(default_model().pair_speeds(A, C, "v100")[1])  # unmeasured: kept


async def test_checkpoint_stores_what_running_attempts_measured(tmp_path: pathlib.Path, store: Store) -> None:
    clock, model = FakeClock(), default_model()
    lr = learner(store, clock, model)
    a, b = job("a", A), job("b", B)
    place(lr, clock, a)
    sa = progress(lr, a, 1, [100.0] * 3)
    place(lr, clock, a, b)
    progress(lr, a, sa, [30.0] * 3)
    assert await lr.checkpoint() == 0  # not due yet
    clock.advance(60.0)
    assert await lr.checkpoint() == 1
    assert [(r[0], r[1], r[3]) for r in rows(tmp_path / "horus.db", "pair_speeds")] == [(A, B, 0.3)]
    await lr.attempt_ended(a, 1)  # nothing new since the checkpoint: no second sample
    assert [r[4] for r in rows(tmp_path / "horus.db", "pair_speeds")] == [1]


async def test_learning_survives_a_restart(db: Db) -> None:
    """(On both backends: the learned tables' upserts and reads.)"""
    store = await Store.open(db.target)
    try:
        clock = FakeClock()
        first = learner(store, clock, default_model())
        await learn_bad_pair(first, clock)
        use = JobGpuReading(job_id="p", attempt=1, gpu_uuid="g0", util_sm=40, mem_used_mib=900)
        hb = Heartbeat(jobs=(use,))
        first.on_heartbeat("n1", hb)
        await first.attempt_ended(job("p", C), 1)
        fresh = default_model()
        assert await learner(store, clock, fresh).load() == 2  # one profile, one pair (both ways)
        assert fresh.pair_speeds(A, B, "v100") == pytest.approx((0.25, 0.25), abs=1e-3)
        assert fresh.pair_speeds(B, A, "v100") == pytest.approx((0.25, 0.25), abs=1e-3)
        assert fresh.profile_of(C).source == "measured"
        assert fresh.profile_of(C).mem_mib == with_margin(900)  # (the measured peak as a cap: sharing.md)
    finally:
        await store.close()


async def test_an_unreadable_stored_table_does_not_stop_the_start(
    tmp_path: pathlib.Path, store: Store
) -> None:
    clock = FakeClock()
    await learn_bad_pair(learner(store, clock, default_model()), clock)
    with sqlite3.connect(tmp_path / "horus.db") as conn:
        conn.execute("INSERT INTO profiles VALUES ('x', 1, 2, 3, 1, '{not json', 0)")
    fresh = default_model()
    assert await learner(store, clock, fresh).load() == 1  # the pair; the profiles are skipped
    assert fresh.pair_speeds(A, B, "v100") == pytest.approx((0.25, 0.25), abs=1e-3)


async def test_bad_input_never_raises_and_teaches_nothing(tmp_path: pathlib.Path, store: Store) -> None:
    clock, model = FakeClock(), default_model()
    lr = learner(store, clock, model)
    lr.on_progress("n1", AttemptProgress(job_id="ghost", attempt=3, step=5, samples_per_s=math.nan))
    lr.on_placement("n1", [job("x", "")], {("x", 1)}, TYPES)  # no signature
    lr.on_placement("n1", [job("y", A, ("nope",))], {("y", 1)}, TYPES)  # a GPU the node does not have
    odd = job("z", A)
    place(lr, clock, odd)
    progress(lr, odd, 1, [math.nan, -5.0, math.inf, 0.0, 1e300])
    await lr.attempt_ended(odd, 1)
    await lr.attempt_ended(job("ghost", A), 3)
    await lr.attempt_ended(job("never", A), 1)
    db = tmp_path / "horus.db"
    assert rows(db, "pair_speeds") == [] and rows(db, "solo_throughputs") == []
    assert lr.apply_observations() == 0


# ------------------------------------------------------------------------------ the decision


def one_gpu_snapshot(running: str, pending: str) -> ClusterSnapshot:
    gpu = Gpu("g0", "n1", 0, "Tesla V100-SXM2-16GB", 16384, "v100", True)
    return ClusterSnapshot(
        nodes=(Node("n1", (gpu,), NodeState.READY, 0.0),),
        jobs=(
            job("a", running),
            # one id per spec: (id, version) names one state of a job (the policy caches on it)
            Job(f"b-{pending}", JobSpec(("x",), job_type=pending), JobState.PENDING, submitted_at=1.0),
        ),
    )


async def test_a_learned_bad_pair_changes_the_horus_decision(store: Store) -> None:
    clock, model = FakeClock(), default_model()
    policy = make_policy("horus", model)
    before = policy.decide(one_gpu_snapshot(A, B), 0.0)
    assert isinstance(before[0], Assign) and before[0].gpus == ("g0",)  # the table says: fine
    lr = learner(store, clock, model)
    await learn_bad_pair(lr, clock)
    lr.apply_observations()
    (after,) = policy.decide(one_gpu_snapshot(A, B), 0.0)
    assert isinstance(after, Wait) and "speed" in after.reason, after
    (other,) = policy.decide(one_gpu_snapshot(A, A), 0.0)
    assert isinstance(other, Assign)  # only the measured pair changed


# ------------------------------------------------------------------------------ through the stream


async def test_pair_learned_through_the_worker_stream(tmp_path: pathlib.Path) -> None:
    clock, model = FakeClock(), default_model()
    cfg = config(tmp_path, policy="horus", heartbeat_s=0.5)
    async with Master(cfg, clock=clock, interference=model) as m, client_for(m) as stub:
        assert m.core.learner.settle_s == 1.0  # two heartbeats
        w = FakeWorker(m.port, "node-a", n_gpus=1)
        await w.connect()
        gpu = w.gpus[0].uuid

        async def beat(*attempts: tuple[str, int]) -> None:
            await w.beat_jobs(gpu, *attempts)
            clock.advance(1.0)

        async def report(job_id: str, steps: range, rate: float) -> None:
            for s in steps:
                msg = wpb.AttemptProgress(job_id=job_id, attempt=1, step=s, samples_per_s=rate)
                await w.send(progress=msg)

        a = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=A)))).job
        assign_a = await w.recv_kind("assign")
        await w.update(a.id, 1, pb.JOB_STATE_RUNNING)
        await beat((a.id, 1))
        await report(a.id, range(1, 5), 400.0)
        b = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(job_type=B)))).job
        assign_b = await w.recv_kind("assign")
        assert list(assign_b.gpus) == list(assign_a.gpus) == [gpu]  # the table says they pair well
        await w.update(b.id, 1, pb.JOB_STATE_RUNNING)
        await beat((a.id, 1), (b.id, 1))
        await report(a.id, range(5, 9), 100.0)
        await w.update(a.id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.update(b.id, 1, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
        resp = await stub.ListProfiles(cpb.ListProfilesRequest())
        assert [(p.job_type, p.co_runner, p.gpu_type, p.speed, p.samples) for p in resp.pairs] == [
            (A, B, "v100", 0.25, 1)
        ]
        profiles = {p.job_type: p for p in resp.profiles}
        assert dict(profiles[A].co_speed) == {B: 0.25}
        assert dict(profiles[A].solo_samples_per_s) == {"v100x1": 400.0}
        await m.scheduler.run_once()  # hands the observation to the model between passes
        assert model.pair_speeds(A, B, "v100")[0] == pytest.approx(0.25, abs=1e-3)
        await w.close()
