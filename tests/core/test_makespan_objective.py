"""``horus`` with ``objective="makespan"`` (horus_core/policies/makespan.py): a batch of known
lengths ends sooner than under the default objective, a waiting job is not starved by a stream
of longer ones, and other policies ignore the objective."""

from __future__ import annotations

import math

import pytest

from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.policies import OBJECTIVES, make_policy, makespan
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster, summarize

R50 = "ResNet-50 (batch size 64)"  # two of them on one GPU gain too little: horus never pairs them
H = 3600.0
MODEL = default_model()
CONFIG = SimConfig(min_speed=0.0, restart_cost_s=0.0)


def job(hours: float, arrival_h: float = 0.0) -> TraceJob:
    rate = MODEL.solo_throughput(R50, 1, "v100")
    assert rate
    return TraceJob(R50, 1, round(hours * H * rate), arrival_h * H)


def run(jobs: list[TraceJob], gpus: int, objective: str) -> Simulator:
    nodes = build_cluster(f"v100:{gpus}", gpus)
    return Simulator(jobs, nodes, make_policy("horus", MODEL, objective=objective), MODEL, CONFIG)


def test_a_batch_ends_sooner_with_the_makespan_objective() -> None:
    # Two GPUs, jobs of 1, 1 and 2 hours submitted at once (in that order): served in order the
    # two short ones go first and the long one ends at 3 h; longest first, all end by 2 h.
    batch = [job(1), job(1), job(2)]
    jct = summarize(run(batch, 2, "jct").run())
    span = summarize(run(batch, 2, "makespan").run())
    assert jct["makespan_h"] == pytest.approx(3.0, abs=0.01)
    assert span["makespan_h"] == pytest.approx(2.0, abs=0.01)
    assert span["unfinished"] == 0 and span["preemptions"] == 0


def stream() -> list[TraceJob]:
    """One GPU; a 10 h job arrives every 9.9 h (each is waiting when the last ends) and a 1 h
    job at 0.05 h: longest first alone would run it after every long one."""
    return [job(10, 9.9 * k) for k in range(6)] + [job(1, 0.05)]


def short_start_h(objective: str) -> float:
    records = run(stream(), 1, objective).run().records
    short = min(records, key=lambda r: r.run_s)
    assert short.arrival == 0.05 * H and short.first_start is not None
    return short.first_start / H


def test_a_waiting_job_is_not_starved_by_longer_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    bounded = short_start_h("makespan")
    # It ranks as long as its wait / AGING: past 20 h of waiting it outranks the 10 h jobs.
    assert bounded <= makespan.AGING * 10 + 10 + 0.1
    monkeypatch.setattr(makespan, "AGING", math.inf)  # no bound: it goes after all six
    assert short_start_h("makespan") >= 59.0 > bounded


def test_the_objective_is_checked_and_only_horus_reads_it() -> None:
    assert OBJECTIVES == ("jct", "makespan")
    with pytest.raises(InvalidArgument, match="unknown objective 'fast'; choose one of jct, makespan"):
        make_policy("horus", MODEL, objective="fast")
    assert make_policy("horus", MODEL, objective="makespan").config is makespan.HORUS_MAKESPAN  # type: ignore[attr-defined]
    for name in ("fifo", "horus-las", "gavel-las-perf", "lucid"):
        assert type(make_policy(name, MODEL, objective="makespan")) is type(make_policy(name, MODEL))
