"""The packing policies' fast path (caches kept across calls, numpy instead of per-job Python)
decides exactly what the plain path and a fresh policy object decide."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from random import Random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import queue_order

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import (
    Action,
    Assign,
    ClusterSnapshot,
    Gpu,
    Job,
    JobChanges,
    JobSpec,
    JobState,
    Node,
    NodeState,
    ProfileHints,
    Wait,
)
from horus_core.packing import PackParams, codes
from horus_core.packing.assemble import assemble
from horus_core.packing.cluster import ClusterLayout, NodeCache
from horus_core.packing.jobs import JobTable, Live
from horus_core.policies import Policy, make_policy
from horus_core.policies._wide import split
from horus_core.policies.gandiva import GandivaPolicy
from horus_core.policies.order import by_keys
from horus_core.policies.pack import PackingPolicy
from horus_core.policies.packer import Ask, Ix
from horus_core.policies.reasons import WaitFacts, wait_reason, wait_texts
from horus_core.policies.views import View
from horus_core.testing.plain_packer import PlainPacker
from horus_core.testing.plain_problem import build_problem

PACKING = ["binpack", "gandiva", "horus", "horus-paper", "horus-util", "horus+", "lucid"]
GAVEL = ["ResNet-18 (batch size 16)", "ResNet-50 (batch size 128)", "Recommendation (batch size 512)", "A3C"]
# (job_type, hints): Gavel types, an unknown type that always comes with the same hints, one
# that never has hints, hint-only signatures and the default.
SHAPES = [(t, ProfileHints()) for t in GAVEL] + [
    ("custom-a", ProfileHints(util_avg=20.0, mem_mib=3000)),
    ("custom-b", ProfileHints()),
    ("", ProfileHints(util_avg=40.0, util_peak=70.0, mem_mib=6000)),
    ("", ProfileHints()),
]
KINDS = [("Tesla V100-SXM2-16GB", 16160, "v100"), ("NVIDIA A100 40GB", 40960, "")]
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Node, ...]:
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(KINDS))
        size = draw(st.integers(1, 4))
        order = draw(st.permutations(range(size)))  # a node's tuple need not be in index order
        gpus = tuple(
            Gpu(f"n{i}g{k}", f"n{i}", k, kind[0], kind[1], kind[2], healthy=draw(st.integers(0, 5)) > 0)
            for k in order
        )
        state = draw(st.sampled_from([NodeState.READY] * 4 + [NodeState.LOST, NodeState.DRAINING]))
        nodes.append(Node(f"n{i}", gpus, state))
    return tuple(nodes)


@st.composite
def new_job(draw: st.DrawFn, jid: str, nodes: tuple[Node, ...]) -> Job:
    job_type, hints = draw(st.sampled_from(SHAPES))
    spec = JobSpec(
        ("x",),
        gpus=draw(st.sampled_from([1, 1, 1, 2, 3, 4, 8])),
        job_type=job_type,
        hints=hints,
        exclusive=draw(st.integers(0, 6)) == 0,
        priority=draw(st.sampled_from([0, 0, 0, 1, -1])),
        total_steps=draw(st.sampled_from([0, 100, 5000, 10**6])),
    )
    job = Job(jid, spec, JobState.PENDING, submitted_at=float(draw(st.integers(0, 4))))
    if draw(st.integers(0, 2)) == 0:  # already running somewhere (maybe on a lost node)
        node = draw(st.sampled_from(nodes))
        on = st.sampled_from([g.uuid for g in node.gpus])
        uuids = draw(st.lists(on, min_size=1, max_size=3, unique=True))
        state = draw(st.sampled_from([JobState.RUNNING, JobState.ASSIGNED]))
        job = replace(job, state=state, node=node.name, gpus=tuple(uuids), attempt=1)
    return job


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    nodes = draw(clusters())
    jobs = [draw(new_job(f"j{i}", nodes)) for i in range(draw(st.integers(0, 24)))]
    return ClusterSnapshot(nodes, tuple(jobs))


def evolve(
    draw: st.DrawFn, snap: ClusterSnapshot, actions: list[Action], step: int, model: InterferenceModel
) -> ClusterSnapshot:
    """The next tick: some Assigns applied, some jobs finished, new ones arrived, a node lost or
    back, a GPU failed, the model learned something."""
    assigned = {a.job_id: a for a in actions if isinstance(a, Assign) and draw(st.booleans())}
    jobs = []
    for job in snap.jobs:
        if job.id in assigned:
            a = assigned[job.id]
            job = replace(job, state=JobState.RUNNING, node=a.node, gpus=a.gpus, attempt=job.attempt + 1,
                          version=job.version + 1)  # fmt: skip
        elif draw(st.integers(0, 4)) == 0:
            continue  # finished (or cancelled)
        elif draw(st.integers(0, 4)) == 0:
            job = replace(job, spec=replace(job.spec))  # read back from a store: an equal new spec
        jobs.append(job)
    jobs += [draw(new_job(f"s{step}j{i}", snap.nodes)) for i in range(draw(st.integers(0, 6)))]
    nodes = list(snap.nodes)
    change = draw(st.integers(0, 3))
    if change == 1:
        i = draw(st.integers(0, len(nodes) - 1))
        lost = nodes[i].state is NodeState.READY
        nodes[i] = replace(nodes[i], state=NodeState.LOST if lost else NodeState.READY)
    elif change == 2:
        i = draw(st.integers(0, len(nodes) - 1))
        k = draw(st.integers(0, len(nodes[i].gpus) - 1))
        gpus = list(nodes[i].gpus)
        gpus[k] = replace(gpus[k], healthy=not gpus[k].healthy)
        nodes[i] = replace(nodes[i], gpus=tuple(gpus))
    elif change == 3:
        nodes[0] = replace(nodes[0])  # an equal node, a new object
    if draw(st.integers(0, 3)) == 0:
        sig = draw(st.sampled_from([t for t, _ in SHAPES if t]))
        util, mem = draw(st.sampled_from([10.0, 50.0, 90.0])), draw(st.sampled_from([900, 5000]))
        model.observe_profile(sig, util, 95.0, mem)
    return ClusterSnapshot(tuple(nodes), tuple(jobs))


def warm_model() -> InterferenceModel:
    """A model that has seen each type's hints (else the first pass changes it for the next)."""
    model = default_model()
    for job_type, hints in SHAPES:
        model.enter(JobSpec(("x",), job_type=job_type, hints=hints))
    return model


def fresh_like(cached: Policy, name: str, model: InterferenceModel) -> Policy:
    fresh = make_policy(name, model)
    if isinstance(cached, GandivaPolicy) and isinstance(fresh, GandivaPolicy):
        fresh.bad_pairs = set(cached.bad_pairs)  # what it learned is policy state, not a cache
    if isinstance(cached, PackingPolicy) and isinstance(fresh, PackingPolicy):
        fresh.las = copy.deepcopy(cached.las)  # the attained-service ledger, likewise
        fresh.gate.reserve = copy.deepcopy(cached.gate.reserve)  # the head gang's reservation, likewise
        book, new = cached.book, fresh.book  # the attempts seen, likewise (not the caches)
        new.stints, new.gangs, new.last = copy.deepcopy(book.stints), dict(book.gangs), book.last
    return fresh


@SLOW
@given(st.sampled_from(PACKING), snapshots(), st.data())
def test_a_policy_object_decides_like_a_fresh_one_over_changing_snapshots(
    name: str, first: ClusterSnapshot, data: st.DataObject
) -> None:
    model = warm_model()
    cached = make_policy(name, model)
    snap = first
    for step in range(5):
        now = 100.0 + 50.0 * step
        fresh = fresh_like(cached, name, model)
        got = cached.decide(snap, now)
        assert got == fresh.decide(snap, now), f"step {step}"
        snap = evolve(data.draw, snap, got, step, model)


@SLOW
@given(st.sampled_from(PACKING), snapshots())
def test_the_fast_path_decides_like_the_plain_one(name: str, snap: ClusterSnapshot) -> None:
    fast, plain = make_policy(name), make_policy(name)
    plain.packer = PlainPacker()  # type: ignore[attr-defined]
    for now in (10.0, 10.0, 4000.0):  # twice: the second call runs on warm caches
        assert fast.decide(snap, now) == plain.decide(snap, now)


@SLOW
@given(st.sampled_from(PACKING), snapshots(), st.sampled_from([10.0, 4000.0]))
def test_each_policy_s_one_queue_order_is_the_plain_sorted_order(
    name: str, snap: ClusterSnapshot, now: float
) -> None:
    """The order a policy hands the packer equals the oracle's ``sorted`` over Job objects (on
    one GPU type: on several, a heterogeneity-aware policy packs each type's tier apart)."""
    assume(len({g.gpu_type for n in snap.nodes for g in n.gpus}) <= 1)
    model = warm_model()
    policy = make_policy(name, model)
    seen: list[list[str]] = []
    real = policy.packer.pack  # type: ignore[attr-defined]

    def spy(view: View, ask: Ask) -> list[Action]:
        def recorded(live: Live, layout: ClusterLayout) -> Ix:
            positions = ask.order(live, layout)
            seen.append([live.pending[i].id for i in positions.tolist()])
            return positions

        return real(view, replace(ask, order=recorded))  # type: ignore[no-any-return]

    policy.packer.pack = spy  # type: ignore[attr-defined]
    policy.decide(snap, now)
    _, rest = split(snap)  # gangs larger than a node are placed apart; the kernel sees the rest
    want = [j.id for j in queue_order(name, policy, rest, now)]
    assert seen == ([want] if want else [])


def _hinted(jid: str, hints: ProfileHints, at: float, state: JobState = JobState.PENDING) -> Job:
    spec = JobSpec(("x",), job_type="mine", hints=hints)
    if state is JobState.PENDING:
        return Job(jid, spec, state, submitted_at=at)
    return Job(jid, spec, state, submitted_at=at, node="n0", gpus=("g0",), attempt=1)


def test_an_unknown_type_with_conflicting_hints_decides_like_the_plain_oracle() -> None:
    """Which hints win depends on the order jobs enter the job table (``model.enter``: the
    last one with other hints wins); the oracle packs on the same registrations, so the
    placements and the profile the model keeps are the same."""
    gpus = tuple(Gpu(f"g{k}", "n0", k, "V100", 16160, "v100") for k in range(2))
    small, big = ProfileHints(util_avg=5.0), ProfileHints(mem_mib=12000)
    runner = _hinted("r", big, 0.0, JobState.RUNNING)
    queued = (_hinted("a", ProfileHints(), 0.0), _hinted("b", big, 1.0), _hinted("c", small, 2.0))
    snaps = [ClusterSnapshot((Node("n0", gpus),), jobs) for jobs in (queued, (runner, *queued), queued[1:2])]
    for name in PACKING:
        models = [warm_model(), warm_model()]
        fast, plain = make_policy(name, models[0]), make_policy(name, models[1])
        plain.packer = PlainPacker()  # type: ignore[attr-defined]
        for snap in (*snaps, *reversed(snaps), snaps[0]):
            assert fast.decide(snap, 5.0) == plain.decide(snap, 5.0), name
            assert models[0].profile_of("mine") == models[1].profile_of("mine"), name


@SLOW
@given(snapshots(), st.booleans(), st.randoms(use_true_random=False))
def test_assemble_builds_the_arrays_build_problem_builds(
    snap: ClusterSnapshot, split: bool, rnd: Random
) -> None:
    model = warm_model()
    table, nodes = JobTable(), NodeCache()
    pending = snap.pending()
    for _ in range(2):  # cold, then warm caches
        positions = np.array(rnd.sample(range(len(pending)), len(pending)), np.intp)
        queue = [pending[p] for p in positions]
        plain, layout = build_problem(snap, queue, model, split_by_gpus=split)
        live = table.scan(snap.jobs, model)
        fast, keys = assemble(nodes.layout(snap.nodes), live, positions, model, split_by_gpus=split)
        assert table.class_keys(keys, split) == layout.classes
        for field in ("node_start", "gpu_kind", "gpu_nres", "gpu_res", "gpu_excl", "kind_cap", "cls_mem",
                      "cls_util", "cls_peak", "speed", "job_cls", "job_gpus", "job_excl"):  # fmt: skip
            a, b = getattr(fast, field), getattr(plain, field)
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), field


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-1, 0, 1]), st.sampled_from([0.0, -0.0, 1.5, math.inf]),
                          st.sampled_from(["b", "a", "c", "aa"])), max_size=30))  # fmt: skip
def test_by_keys_sorts_like_sorted(rows: list[tuple[int, float, str]]) -> None:
    ids = [f"{s}{i}" for i, (_, _, s) in enumerate(rows)]
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] for r in rows], np.float64)
    want = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], ids[i]))
    assert by_keys([a, b], ids).tolist() == want


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 6), st.integers(1, 9), st.booleans(), st.sampled_from([1000, 4720]),
                  st.integers(0, 4), st.integers(0, 7)),
        max_size=25,
    ),
    st.integers(0, 8),
)  # fmt: skip
def test_wait_texts_say_what_wait_reason_says(
    rows: list[tuple[int, int, bool, int, int, int]], largest: int
) -> None:
    params = PackParams(mode=codes.MODE_HORUS, lookahead=5)
    cols = list(zip(*rows, strict=True)) or [()] * 6
    code, gpus, excl, mem, detail, blocked = (np.array(c, t) for c, t in zip(
        cols, (np.int32, np.int32, np.bool_, np.int64, np.int32, np.int64), strict=True))  # fmt: skip
    got = wait_texts(code, gpus, excl, mem, detail, blocked, largest, params, "refused")
    want = [wait_reason(WaitFacts(g, e, m, c, d, largest, b), params, "refused") for c, g, e, m, d, b in rows]
    assert got == want


@pytest.mark.parametrize("name", PACKING)
def test_pending_jobs_left_pending_get_the_same_wait_while_the_reason_holds(name: str) -> None:
    gpus = tuple(Gpu(f"g{k}", "n0", k, "V100", 16160, "v100") for k in range(1))
    jobs = tuple(Job(f"j{i}", JobSpec(("x",), gpus=2), JobState.PENDING, submitted_at=i) for i in range(3))
    policy = make_policy(name)
    snap = ClusterSnapshot((Node("n0", gpus),), jobs)
    first, again = policy.decide(snap, 0.0), policy.decide(snap, 1.0)
    assert first == again and all(isinstance(w, Wait) for w in again)


@SLOW
@given(st.sampled_from(PACKING), snapshots(), st.data())
def test_snapshots_handed_again_out_of_order_decide_like_a_fresh_policy(
    name: str, first: ClusterSnapshot, data: st.DataObject
) -> None:
    """The caches remember job objects by identity across passes; a caller that hands an older
    snapshot again (its objects were remembered, then a spec changed under their id) must still
    get what a fresh policy decides."""
    model = warm_model()
    cached = make_policy(name, model)
    snaps = [first]
    for step in range(3):
        snaps.append(
            evolve(data.draw, snaps[-1], make_policy(name, model).decide(snaps[-1], 0.0), step, model)
        )
    for i in data.draw(st.lists(st.integers(0, len(snaps) - 1), min_size=4, max_size=10)):
        fresh = fresh_like(cached, name, model)
        assert cached.decide(snaps[i], 7.0) == fresh.decide(snaps[i], 7.0), f"snapshot {i}"


def test_an_old_job_object_after_its_spec_changed_keeps_its_own_spec() -> None:
    gpus = tuple(Gpu(f"g{k}", "n0", k, "V100", 16160, "v100") for k in range(4))
    nodes = (Node("n0", gpus),)
    old = Job("x", JobSpec(("x",), gpus=1, job_type=GAVEL[0]), JobState.PENDING)
    new = replace(old, spec=JobSpec(("x",), gpus=4, job_type=GAVEL[1]), version=1)
    runner = Job("r", JobSpec(("x",), job_type=GAVEL[2]), JobState.RUNNING, node="n0", gpus=("g0",))
    a, b = ClusterSnapshot(nodes, (runner, old)), ClusterSnapshot(nodes, (runner, new))
    for name in PACKING:
        fast, plain = make_policy(name), make_policy(name)
        plain.packer = PlainPacker()  # type: ignore[attr-defined]
        for snap in (a, b, a, b, b, a):
            got = fast.decide(snap, 1.0)
            assert got == plain.decide(snap, 1.0), name
            assert all(len(x.gpus) == snap.jobs[1].spec.gpus for x in got if isinstance(x, Assign)), name


def test_the_queue_orders_by_the_submission_time_of_the_job_version_it_sees() -> None:
    """The job table keeps each job's submission time with its spec (confirmed at each new
    version): a job handed again at a new version with another time is ordered by that time."""
    nodes = (Node("n0", (Gpu("g0", "n0", 0, "V100", 16160, "v100"),)),)
    spec = JobSpec(("x",), gpus=1, job_type=GAVEL[0], exclusive=True)  # (one job fits)
    a, b = (Job(i, spec, JobState.PENDING, submitted_at=t) for i, t in (("a", 1.0), ("b", 2.0)))
    later = replace(a, submitted_at=3.0, version=1)
    for name in ("fifo", "horus-util"):
        policy = make_policy(name)
        first = policy.decide(ClusterSnapshot(nodes, (a, b)), 5.0)
        again = policy.decide(ClusterSnapshot(nodes, (later, b)), 5.0)
        assert [x.job_id for x in first if isinstance(x, Assign)] == ["a"], name
        assert [x.job_id for x in again if isinstance(x, Assign)] == ["b"], name


def test_one_id_twice_with_two_specs_is_refused_and_changes_nothing() -> None:
    gpus = tuple(Gpu(f"g{k}", "n0", k, "V100", 16160, "v100") for k in range(4))
    one = Job("x", JobSpec(("x",), gpus=1, job_type=GAVEL[0]), JobState.PENDING)
    two = replace(one, spec=JobSpec(("x",), gpus=2, job_type=GAVEL[1]), submitted_at=1.0, version=1)
    other = Job("y", JobSpec(("x",), gpus=1, job_type=GAVEL[3]), JobState.PENDING, submitted_at=2.0)
    good, bad, later = (
        ClusterSnapshot((Node("n0", gpus),), jobs) for jobs in ((one, other), (one, two, other), (two, other))
    )
    for name in PACKING:
        policy = make_policy(name)
        first = policy.decide(good, 1.0)
        with pytest.raises(ValueError, match="one job id twice"):
            policy.decide(bad, 1.0)
        for snap in (later, good, later):
            assert policy.decide(snap, 1.0) == make_policy(name).decide(snap, 1.0), name
        assert policy.decide(good, 1.0) == first, name


@pytest.mark.parametrize("name", PACKING)
def test_numbers_beyond_the_arrays_order_by_their_saturated_value_or_are_refused(name: str) -> None:
    """Priorities and step counts past 2**53 order exactly (int64), past int64 like its bound;
    a GPU count past int32 is refused with a clear error before the caches change."""
    gpus = tuple(Gpu(f"g{k}", "n0", k, "V100", 16160, "v100") for k in range(1))
    prios = [2**60, 2**60 + 1, 2**70, -(2**70), 0]
    jobs = tuple(
        Job(
            f"j{i}",
            JobSpec(("x",), job_type=GAVEL[0], priority=p, total_steps=2**80, exclusive=True),
            JobState.PENDING,
        )
        for i, p in enumerate(prios)
    )
    snap = ClusterSnapshot((Node("n0", gpus),), jobs)
    policy = make_policy(name)
    (placed,) = [a for a in policy.decide(snap, 1.0) if isinstance(a, Assign)]
    assert placed.job_id == "j2"  # 2**70 saturates to the int64 bound: still the highest
    huge = Job("h", JobSpec(("x",), gpus=2**31, job_type=GAVEL[0]), JobState.PENDING)
    with pytest.raises(ValueError, match="asks for 2147483648 GPUs"):
        policy.decide(ClusterSnapshot(snap.nodes, (*jobs, huge)), 1.0)
    assert policy.decide(snap, 1.0) == make_policy(name).decide(snap, 1.0)


def test_the_job_table_looks_jobs_up_by_the_sources_numbers_as_they_move_up() -> None:
    """The live index numbers its jobs (JobChanges.numbers): the table maps them to slots in an
    array that moves up as old numbers leave, and looks jobs up by id once the numbers are too
    far apart for it (one job queued since long ago among many later ones)."""
    model = default_model()
    table, specs = JobTable(), [JobSpec(("x",), gpus=2, job_type=GAVEL[0])]
    live: dict[int, Job] = {}
    by_id_steps, by_number = 0, False
    lookup = table._lookup

    def counted(jobs: list[Job], changes: JobChanges | None = None) -> Any:
        nonlocal by_id_steps, by_number
        out = lookup(jobs, changes)
        by_number = out[3] is not None
        by_id_steps += not by_number
        return out

    table._lookup = counted  # type: ignore[method-assign]
    for step in range(60):
        for k in range(step * 3000, step * 3000 + 100):  # 100 new jobs; the oldest leave
            live[k] = Job(f"j{k}", specs[0], JobState.PENDING, version=1)  # (alike: a wrong slot shows)
        for k in sorted(live)[1:-300]:
            del live[k]
        if step == 20:
            live[0] = replace(live[0], version=9)  # a new version of the long-queued job
        if step == 50:
            del live[0]  # it started: the numbers are close again
        numbers = sorted(live)
        jobs = [live[k] for k in numbers]
        versions = np.array([j.version for j in jobs], np.int64)
        changes = JobChanges("idx", step, step + 1, {}, np.array(numbers, np.int64), versions)
        got = table.scan(jobs, model, (jobs, []), changes)
        assert [table.specs[s] for s in got.p_slot.tolist()] == [j.spec for j in jobs]
        assert table.seen[got.p_slot].tolist() == versions.tolist()
        assert [table._slot[j.id] for j in jobs] == got.p_slot.tolist()
        if by_number:  # (the index holds every live job's slot: the next scan reads it)
            found = table.numbers.find("idx", np.array(numbers, np.int64))
            assert found is not None and found[0].tolist() == got.p_slot.tolist() and found[1] == 0
        assert len(table.numbers._row) <= 2 * 4 * (8 * len(jobs) + 65536)
    assert 0 < by_id_steps < 60 and table.numbers.base > 0  # (both ways taken; the index moved up)
