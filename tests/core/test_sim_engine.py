"""The event loop: exact analytic cases, measured pair slowdowns, preemption, determinism."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from random import Random
from typing import Any

import pytest

from horus_core.interference import default_model
from horus_core.model import Action, Assign, ClusterSnapshot, JobState, Preempt, Wait
from horus_core.policies import make_policy, policy_names
from horus_core.policies.checks import SnapshotLookup, check_actions
from horus_core.sim import SimConfig, SimulationError, Simulator, TraceJob, build_cluster, summarize

MODEL = default_model()
TABLE: dict[str, Any] = json.loads(
    resources.files("horus_core").joinpath("data/simulation_throughputs.json").read_text()
)
R50, R18 = "ResNet-50 (batch size 64)", "ResNet-18 (batch size 16)"


def solo(job_type: str, gpus: int = 1) -> float:
    return float(TABLE["v100"][str((job_type, gpus))]["null"])


@dataclass
class Scripted:
    """A test policy: ``script(snapshot, now)`` returns the actions."""

    script: Callable[[ClusterSnapshot, float], list[Action]]
    name: str = "scripted"
    calls: list[ClusterSnapshot] = field(default_factory=list)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        self.calls.append(snapshot)
        return self.script(snapshot, now)


def pack_on_first_gpu(snapshot: ClusterSnapshot, now: float) -> list[Action]:
    gpu = snapshot.nodes[0].gpus[0]
    return [Assign(j.id, gpu.node, (gpu.uuid,)) for j in snapshot.pending()]


def run(jobs: list[TraceJob], policy: Any, cluster: str = "v100:8", **config: Any) -> Any:
    return Simulator(jobs, build_cluster(cluster), policy, MODEL, SimConfig(**config)).run()


def test_one_job_alone_takes_steps_over_throughput_exactly() -> None:
    steps = 123_457
    result = run([TraceJob("ResNet-50 (batch size 32)", 4, steps, 0.0)], make_policy("fifo"))
    (rec,) = result.records
    assert rec.jct == steps / solo("ResNet-50 (batch size 32)", 4)
    assert rec.queueing == 0.0 and rec.mean_speed == 1.0 and rec.attempts == 1
    m = summarize(result)
    assert m["makespan_h"] == pytest.approx(rec.jct / 3600, rel=1e-12)
    assert m["gpu_util"] == pytest.approx(4 / 8) and m["useful_util"] == pytest.approx(4 / 8)
    assert m["slow_share"] == 0.0 and m["unfinished"] == 0


def test_late_arrival_and_queueing_behind_a_gang() -> None:
    # Two 8-GPU jobs on one 8-GPU node: the second waits for the first, fifo order.
    steps = 10_000
    jobs = [TraceJob(R50, 8, steps, 0.0), TraceJob(R50, 8, steps, 100.0)]
    a, b = run(jobs, make_policy("fifo")).records
    duration = steps / solo(R50, 8)
    assert a.finish == pytest.approx(duration, rel=1e-12)
    assert b.first_start == a.finish
    assert b.jct == pytest.approx(2 * duration - 100.0, rel=1e-12)


def test_pair_slowdown_comes_from_the_measured_table() -> None:
    pair = TABLE["v100"][str((R50, 1))][str((R18, 1))]  # [R50 steps/s, R18 steps/s] together
    steps_a, steps_b = 8_000, 20_000
    result = run(
        [TraceJob(R50, 1, steps_a, 0.0), TraceJob(R18, 1, steps_b, 0.0)], Scripted(pack_on_first_gpu)
    )
    a, b = result.records
    assert b.finish == pytest.approx(steps_b / pair[1], rel=1e-9)
    left = steps_a - pair[0] * b.finish
    assert a.finish == pytest.approx(b.finish + left / solo(R50), rel=1e-9)
    assert b.mean_speed == pytest.approx(pair[1] / solo(R18), rel=1e-9)
    assert b.mean_speed < 0.8 < a.mean_speed < 1.0
    m = summarize(result)
    assert m["slow_share"] == 0.5 and m["slow_any_share"] == 0.5
    together = pair[0] / solo(R50) + pair[1] / solo(R18)
    expected_useful = (together * b.finish + (a.finish - b.finish)) / a.finish / 8
    assert m["useful_util"] == pytest.approx(expected_useful, rel=1e-9)
    assert m["gpu_util"] == pytest.approx(1 / 8, rel=1e-9)


def _does_not_fit() -> tuple[str, str]:
    for key, entry in TABLE["v100"].items():
        job, gpus = eval(key)  # keys are Python tuple literals, e.g. "('A3C', 1)"
        for other, speeds in entry.items():
            if gpus == 1 and other != "null" and speeds == [0.0, 0.0] and eval(other)[1] == 1:
                return job, eval(other)[0]
    raise AssertionError("the table has no pair that does not fit")


def test_pair_that_does_not_fit_is_evicted_and_retried() -> None:
    first, second = _does_not_fit()
    jobs = [TraceJob(first, 1, 1_000, 0.0), TraceJob(second, 1, 1_000, 10.0)]
    result = run(jobs, Scripted(pack_on_first_gpu))
    a, b = result.records
    assert b.evictions >= 1 and result.counters["evictions"] == b.evictions
    assert a.jct == pytest.approx(1_000 / solo(first), rel=1e-9)  # never slowed by the failed start
    assert b.first_start is not None and b.finish is not None and b.finish > a.finish


def _time_share(snapshot: ClusterSnapshot, now: float) -> list[Action]:
    """One GPU, round robin: on every periodic round (100 s), stop the running job and start the
    one that has waited longest; in other rounds, start a job only if the GPU is free."""
    gpu = snapshot.nodes[0].gpus[0]
    running = [j for j in snapshot.jobs if j.state is JobState.RUNNING]
    pending = sorted(snapshot.pending(), key=lambda j: (j.updated_at, j.id))
    if not pending or (running and now % 100.0 != 0.0):
        return []
    actions: list[Action] = [Preempt(j.id, "time slice over") for j in running]
    return [*actions, Assign(pending[0].id, gpu.node, (gpu.uuid,))]


@pytest.mark.parametrize("restart_cost", [0.0, 30.0])
def test_time_sharing_preempts_and_charges_the_restart_cost(restart_cost: float) -> None:
    steps = round(solo(R50) * 1000)  # about 1000 s each, alone
    jobs = [TraceJob(R50, 1, steps, 0.0), TraceJob(R50, 1, steps, 0.0)]
    result = run(jobs, Scripted(_time_share), cluster="v100:1", restart_cost_s=restart_cost, round_s=100.0)
    a, b = result.records
    preemptions = result.counters["preemptions"]
    assert preemptions == a.preemptions + b.preemptions > 5
    work = 2 * steps / solo(R50) + preemptions * restart_cost
    assert max(a.finish or 0, b.finish or 0) == pytest.approx(work, rel=1e-9)
    assert a.attempts == a.preemptions + 1 and result.counters["migrations"] == 0


def test_a_job_restarted_on_other_gpus_is_a_migration() -> None:
    calls: list[float] = []

    def move(snapshot: ClusterSnapshot, now: float) -> list[Action]:
        calls.append(now)
        gpus = snapshot.nodes[0].gpus
        if not snapshot.jobs or snapshot.jobs[0].id != "j000000":
            return pack_on_first_gpu(snapshot, now)
        job = snapshot.jobs[0]
        if job.state is JobState.PENDING:
            target = gpus[0] if job.attempt == 0 else gpus[1]
            return [Assign(job.id, target.node, (target.uuid,))]
        if now == 200.0:  # the master drops the Assign: one action per job and round
            return [Preempt(job.id, "defragment"), Assign(job.id, gpus[1].node, (gpus[1].uuid,))]
        return []

    steps = round(solo(R18) * 1000)
    arrivals = [TraceJob(R18, 1, steps, 0.0), TraceJob("A3C", 1, 1_000, 200.0)]
    result = run(arrivals, Scripted(move), restart_cost_s=30.0, round_s=None)
    rec = result.records[0]
    assert result.counters["dropped"] == 1 and "second action" in result.warnings[0]
    assert 201.0 in calls  # the follow-up round, poke_s after the preemption
    assert result.counters["migrations"] == 1 and rec.attempts == 2 and rec.preemptions == 1
    assert rec.jct == pytest.approx(steps / solo(R18) + 30.0 + 1.0, rel=1e-9)


def test_snapshots_look_like_the_live_master() -> None:
    policy = Scripted(pack_on_first_gpu)
    run([TraceJob(R50, 1, 5_000, 0.0), TraceJob(R18, 1, 5_000, 50.0)], policy)
    first, second = policy.calls[0], policy.calls[1]
    assert first.nodes is second.nodes  # frozen nodes are reused, not rebuilt
    (pending,) = first.pending()
    assert pending.attempt == 0 and pending.gpus == () and pending.submitted_at == 0.0
    running = next(j for j in second.jobs if j.state is JobState.RUNNING)
    assert running.attempt == 1 and running.gpus == ("GPU-v100-000-0",) and running.node == "v100-000"
    assert [j.id for j in second.jobs] == ["j000000", "j000001"]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda j: Assign(j, "v100-000", ("GPU-v100-009-0",)), "not a healthy GPU"),
        (lambda j: Assign(j, "nowhere", ("GPU-v100-000-0",)), "node 'nowhere' is not ready"),
        (lambda j: Assign(j, "v100-000", ("GPU-v100-000-0", "GPU-v100-000-1")), "needs 1 distinct"),
        (lambda j: Preempt(j, "why not"), "job is PENDING, not active"),
        (lambda j: Assign(j, "v100-000", ("GPU-v100-000-0", "GPU-v100-000-0")), "distinct"),
        (lambda j: Assign("ghost", "v100-000", ("GPU-v100-000-0",)), "unknown job"),
    ],
)
def test_impossible_actions_are_dropped_as_the_master_does(
    action: Callable[[str], Action], message: str
) -> None:
    def script(snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return [action(snapshot.jobs[0].id)] if now == 0.0 else pack_on_first_gpu(snapshot, now)

    with pytest.raises(SimulationError, match=f"policy 'scripted' at t=0.000: .*dropped: .*{message}"):
        run([TraceJob(R50, 1, 100, 0.0)], Scripted(script), strict=True)
    result = run([TraceJob(R50, 1, 100, 0.0)], Scripted(script), round_s=50.0)
    assert result.counters["dropped"] == 1 and message in result.warnings[0]
    assert result.unfinished == 0  # placed by a later round


def test_a_queue_nothing_starts_ends_instead_of_looping() -> None:
    policy = Scripted(lambda s, now: [Wait(j.id, "never") for j in s.pending()])
    result = run([TraceJob(R50, 1, 100, 0.0)], policy)
    assert result.unfinished == 1 and "stalled" in result.warnings[-1]
    assert result.counters["rounds"] <= 12


def test_max_time_stops_the_clock() -> None:
    result = run([TraceJob(R50, 1, 10**9, 0.0)], make_policy("fifo"), max_time_s=3600.0)
    assert result.end == 3600.0 and result.unfinished == 1
    assert result.records[0].run_s == 3600.0


def test_round_options_change_rounds_not_fifo_results() -> None:
    jobs = [TraceJob(R18, 1, 1_000 + 10 * i, float(i)) for i in range(40)]
    base = run(jobs, make_policy("fifo"), cluster="v100:4")
    lazy = run(jobs, make_policy("fifo"), cluster="v100:4", idle_rounds=False)
    assert [r.finish for r in base.records] == [r.finish for r in lazy.records]
    assert lazy.counters["rounds"] <= base.counters["rounds"]
    coalesced = run(jobs, make_policy("fifo"), cluster="v100:4", min_gap_s=10.0)
    assert coalesced.counters["rounds"] < base.counters["rounds"]
    assert coalesced.unfinished == 0
    assert all((r.queueing or 0) <= 10.0 + 1e-9 for r in coalesced.records[:4])


@pytest.mark.parametrize("name", sorted({"fifo", "binpack", "horus"} & set(policy_names())))
def test_same_seed_same_result(name: str) -> None:
    from horus_core.sim import generate_synthetic, parse_synthetic

    spec = parse_synthetic("synthetic:jobs=120,rate=0.12,seed=3")
    jobs = generate_synthetic(spec, MODEL.solo_throughput)
    assert jobs == generate_synthetic(spec, MODEL.solo_throughput)
    one = run(jobs, make_policy(name, MODEL), cluster="v100:16")
    two = run(jobs, make_policy(name, MODEL), cluster="v100:16")
    assert one.records == two.records and one.counters == two.counters
    if name == "binpack":
        assert any(r.mean_speed < 1.0 for r in one.records)  # co-location happened
    assert _untimed(summarize(one)) == _untimed(summarize(two))
    assert list(one.timeline.t) == list(two.timeline.t)


def _untimed(metrics: dict[str, float | int]) -> dict[str, float | int]:
    timing = ("decide_ms_mean", "decide_ms_p95", "decide_ms_max", "sim_s")
    return {k: v for k, v in metrics.items() if k not in timing}


def test_gang_larger_than_the_cluster_is_capped_to_it() -> None:
    result = run(
        [TraceJob(R50, 8, 1_000, 0.0), TraceJob("A3C", 4, 1_000, 0.0)], make_policy("fifo"), "v100:8"
    )
    assert [r.gpus for r in result.records] == [8, 1]
    result = run([TraceJob(R50, 8, 1_000, 0.0)], make_policy("fifo"), "v100:4")
    assert result.counters["capped_cluster"] == 1 and result.records[0].gpus == 4


def test_the_simulators_lookup_answers_as_the_snapshot_does() -> None:
    """The action checks read the simulator's own indexes (``SimLookup``); at every round they
    must say what the snapshot itself says, for every job, node and GPU, and random actions
    (valid or not) must be kept or dropped exactly as the snapshot-derived checks would."""
    rnd = Random(7)
    checked: list[int] = []
    sim: Simulator | None = None

    def script(snapshot: ClusterSnapshot, now: float) -> list[Action]:
        assert sim is not None
        mine, theirs = sim.lookup, SnapshotLookup(snapshot)
        uuids = [g.uuid for n in snapshot.nodes for g in n.gpus] + ["GPU-nowhere"]
        for j in snapshot.jobs:
            assert mine.job(j.id) is theirs.job(j.id)
        assert mine.job("ghost") is theirs.job("ghost") is None
        for n in [*snapshot.nodes, replace(snapshot.nodes[0], name="nowhere")]:
            assert mine.node_ready(n.name) == theirs.node_ready(n.name)
            for u in uuids:
                assert mine.healthy_gpu(n.name, u) == theirs.healthy_gpu(n.name, u)
        for u in uuids:
            assert sorted(j.id for j in mine.residents(u)) == sorted(j.id for j in theirs.residents(u))
        actions: list[Action] = []
        for j in snapshot.jobs:
            node = rnd.choice(snapshot.nodes)
            gpus = tuple(rnd.sample([g.uuid for g in node.gpus], rnd.choice([1, 1, 2])))
            pick = rnd.random()
            if pick < 0.6:
                actions.append(Assign(j.id, node.name, gpus))
            elif pick < 0.7:
                actions.append(Preempt(j.id, "random"))
            else:
                actions.append(Wait(j.id, "random"))
        rnd.shuffle(actions)
        assert check_actions(snapshot, actions, mine) == check_actions(snapshot, actions)
        checked.append(len(snapshot.jobs))
        return actions

    trace = [TraceJob(rnd.choice([R50, R18]), rnd.choice([1, 1, 2]), 20_000, 30.0 * i) for i in range(40)]
    sim = Simulator(trace, build_cluster("v100:8"), Scripted(script), MODEL, SimConfig(round_s=60.0))
    sim.run()
    assert len(checked) > 40 and max(checked) > 5
