"""The head gang's reservation and backfill (horus_core/policies/backfill.py): unit passes on
hand-made snapshots, and the wait bound checked in the simulator on a synthetic trace."""

from __future__ import annotations

import dataclasses

import pytest

from horus_core.interference import default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobSpec, JobState, Preempt, Wait
from horus_core.policies import gandiva, lucid, make_policy
from horus_core.policies.backfill import WAIT_S, GangReserve
from horus_core.policies.fifo import Fifo
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.reservation import TypesOf, free_times
from horus_core.policies.staged import Driven, drive
from horus_core.policies.state import Book, PassState
from horus_core.policies.views import View
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster

MODEL = default_model()
R50 = "ResNet-50 (batch size 64)"
HOUR = 3600.0
RATE = {g: MODEL.solo_throughput(R50, g, "v100") or 0.0 for g in (1, 8)}
NODES = build_cluster("v100:8")
UUIDS = [g.uuid for g in NODES[0].gpus]


def job(job_id: str, gpus: int, hours: float, submitted: float = 0.0, at: int | None = None) -> Job:
    """A job of ``hours`` of solo work; running on GPU ``at`` (gpus 1) when given."""
    spec = JobSpec(("x",), gpus=gpus, job_type=R50, total_steps=int(hours * HOUR * RATE[gpus]))
    if at is None:
        return Job(job_id, spec, JobState.PENDING, submitted_at=submitted)
    where = (UUIDS[at],)
    return Job(
        job_id, spec, JobState.RUNNING, attempt=1, submitted_at=submitted, node=NODES[0].name, gpus=where
    )


def fifo(reserve: bool = True) -> Driven:
    return drive(Fifo(), TypeGate(reserve=GangReserve(wait_s=0.0) if reserve else None))


def snap(*jobs: Job) -> ClusterSnapshot:
    return ClusterSnapshot(NODES, jobs)


def by_job(actions: list[Action]) -> dict[str, Action]:
    return {a.job_id: a for a in actions}


def reserved(
    reserve: GangReserve, book: Book, snapshot: ClusterSnapshot, now: float, types_of: TypesOf
) -> list[Action]:
    """One pass of the reservation stage alone, around a stage that places nothing."""
    state = PassState.begin(snapshot, now, book)
    reserve.observe(state, MODEL)
    return reserve.run(View(state), lambda v: [Wait(j.id, "no") for j in v.pending()], MODEL, types_of)


def six_running() -> list[Job]:
    return [job(f"r{i}", 1, 10.0, at=i) for i in range(6)]


def test_a_waiting_gang_holds_the_node_and_only_work_that_ends_first_backfills() -> None:
    policy, plain = fifo(), fifo(reserve=False)
    for p in (policy, plain):
        first = by_job(p.decide(snap(*six_running(), job("big", 8, 2.0)), 0.0))
        assert isinstance(first["big"], Wait)  # not head yet: no pass had left it waiting
    later = snap(*six_running(), job("big", 8, 2.0), job("short", 1, 1.0, 50.0), job("long", 1, 20.0, 60.0))
    got, ref = by_job(policy.decide(later, 100.0)), by_job(plain.decide(later, 100.0))
    assert isinstance(ref["short"], Assign) and isinstance(ref["long"], Assign)  # without: both start
    assert isinstance(got["short"], Assign) and isinstance(got["long"], Wait)
    big = got["big"]
    assert isinstance(big, Wait) and "8 GPU(s) reserved for it on v100-000" in big.reason
    assert policy.gate.reserve is not None and policy.gate.reserve.held is not None


def test_the_gang_starts_on_its_reserved_gpus_once_they_are_idle_and_overrunning_backfill_stops() -> None:
    policy = fifo()
    policy.decide(snap(*six_running(), job("big", 8, 2.0)), 0.0)
    policy.decide(snap(*six_running(), job("big", 8, 2.0), job("short", 1, 1.0, 50.0)), 100.0)
    short = dataclasses.replace(job("short", 1, 1.0, 50.0, at=6), attempt=1)
    # The six ended; "short" still runs (its estimate was wrong): it is stopped for the gang.
    got = by_job(policy.decide(snap(job("big", 8, 2.0), short), 200.0))
    assert isinstance(got["short"], Preempt) and "overran" in got["short"].reason
    late = dataclasses.replace(
        job("late", 1, 0.1, -5.0), spec=dataclasses.replace(job("x", 1, 0.1).spec, priority=5)
    )
    back = dataclasses.replace(short, state=JobState.PENDING, gpus=())
    got = by_job(policy.decide(snap(job("big", 8, 2.0), back, late), 201.0))
    assert isinstance(got["big"], Assign) and set(got["big"].gpus) == set(UUIDS)  # ahead of priority 5
    assert isinstance(got["late"], Wait) and isinstance(got["short"], Wait)


def test_the_reservation_goes_where_the_gang_is_predicted_to_finish_first() -> None:
    nodes = build_cluster("k80:8,v100:16")
    on = {n.name: n.gpus for n in nodes}
    running = [
        dataclasses.replace(
            job(f"v{i}", 1, h), state=JobState.RUNNING, attempt=1, node=n, gpus=(on[n][0].uuid,)
        )
        for i, (n, h) in enumerate([("v100-000", 5.0), ("v100-001", 1.0)])
    ]
    reserve, book = GangReserve(wait_s=0.0), Book()
    blocked = ClusterSnapshot(nodes, (*running, job("big", 8, 2.0)))
    # A K80 node is idle now, but 2 h of V100 work takes ~7.6 h on K80s: wait 1 h for v100-001.
    reserved(reserve, book, blocked, 0.0, lambda j: None)
    got = by_job(reserved(reserve, book, blocked, 1.0, lambda j: None))
    assert isinstance(got["big"], Wait) and "on v100-001" in got["big"].reason
    # A gang that may not use V100s (its types: k80) takes the idle K80 node at once.
    reserve, book = GangReserve(wait_s=0.0), Book()
    reserved(reserve, book, blocked, 0.0, lambda j: frozenset({"k80"}))
    got = by_job(reserved(reserve, book, blocked, 1.0, lambda j: frozenset({"k80"})))
    assert isinstance(got["big"], Assign) and got["big"].node == "k80-000"


def test_free_times_are_the_longest_remaining_job_per_gpu() -> None:
    jobs = [job("a", 1, 1.0, at=0), job("b", 1, 3.0, at=0), job("c", 1, 2.0, at=1)]
    left = {"a": 1.0, "b": 3.0, "c": 2.0}
    free = free_times(snap(*jobs), 10.0, lambda j: left[j.id])
    assert free[UUIDS[0]] == 13.0 and free[UUIDS[1]] == 12.0 and free[UUIDS[2]] == 10.0


def test_unknown_work_is_expected_to_last_as_long_as_it_has_run() -> None:
    reserve, book = GangReserve(wait_s=0.0), Book()
    running = dataclasses.replace(job("a", 1, 1.0, at=0), spec=JobSpec(("x",), job_type=R50))
    reserved(reserve, book, snap(running), 0.0, lambda j: None)
    later = PassState.begin(snap(running), 5000.0, book)
    assert reserve.remaining(running, later, MODEL) == 5000.0
    soon = PassState.begin(snap(running), 100.0, Book())
    assert reserve.remaining(running, soon, MODEL) >= 600.0


def stream(gang_at_h: float = 10.0, hours: float = 100.0) -> list[TraceJob]:
    """1-GPU jobs of 4 h arriving every half hour for ``hours`` (about 8 running at once on 8
    GPUs), and one 8-GPU gang of 2 h."""
    jobs = [TraceJob(R50, 1, int(4 * HOUR * RATE[1]), 0.5 * HOUR * i) for i in range(int(2 * hours))]
    jobs.append(TraceJob(R50, 8, int(2 * HOUR * RATE[8]), gang_at_h * HOUR + 1.0))
    return sorted(jobs, key=lambda j: j.arrival_s)


def gang_run(name: str, reserve: bool) -> tuple[float, float, float]:
    """(the gang's queueing, the latest end of a job started by the pass that made it head,
    the policy's shipped ``wait_s``)."""
    policy = make_policy(name, MODEL)
    gate = policy.gate  # type: ignore[attr-defined]
    assert isinstance(gate.reserve, GangReserve)  # on by default for every packing policy
    wait_s = gate.reserve.wait_s
    gate.reserve = gate.reserve if reserve else None
    hours = max(100.0, 10.0 + wait_s / HOUR + 90.0)  # the stream outlasts the gang's wait_s
    result = Simulator(stream(hours=hours), NODES, policy, MODEL, SimConfig(timeline=False)).run()
    (gang,) = [r for r in result.records if r.gpus == 8]
    assert gang.queueing is not None
    # The pass that reserves is the first after it has queued wait_s: within 0.5 h (arrivals).
    head = gang.arrival + wait_s + 0.5 * HOUR
    there = [r.finish for r in result.records if r.first_start is not None and r.first_start <= head]
    return gang.queueing, max(f for f in there if f is not None) - gang.arrival, wait_s


PACKING = ["fifo", "binpack", "lucid", "gandiva", "horus-paper", "horus-util", "horus", "horus+", "optimus"]


@pytest.mark.parametrize("name", PACKING)
def test_in_the_simulator_a_gang_waits_at_most_for_the_jobs_running_when_it_became_head(name: str) -> None:
    queued, bound, wait_s = gang_run(name, reserve=True)
    assert queued <= bound + 1.0
    if name in ("fifo", "lucid", "optimus"):  # nobody shares here: those jobs end within 4 h
        assert queued <= wait_s + 4.5 * HOUR + 1.0
    patient = {"lucid": lucid.GANG_WAIT_S, "gandiva": gandiva.GANG_WAIT_S}
    assert wait_s == patient.get(name, WAIT_S)


@pytest.mark.parametrize("name", ["fifo", "lucid", "optimus"])
def test_without_the_reservation_the_same_gang_starves_behind_the_stream(name: str) -> None:
    queued, bound, _ = gang_run(name, reserve=False)
    assert queued > 50 * HOUR and queued > bound + 40 * HOUR
