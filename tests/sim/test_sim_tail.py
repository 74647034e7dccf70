"""Tail figures of ``summarize`` (p95/p99 JCT, worst total pending time per GPU count), computed
by hand on a small made-up result, and the table that shows them."""

from __future__ import annotations

import math

import pytest

from horus_core.sim import METRIC_KEYS, JobRecord, SimResult, summarize
from horus_core.sim.config import Timeline
from horus_core.sim.report import format_table, to_json

H = 3600.0


def record(
    i: int, gpus: int, arrival: float, first: float | None, finish: float | None, run: float
) -> JobRecord:
    return JobRecord(
        id=f"j{i}", job_type="t", gpus=gpus, arrival=arrival, first_start=first, finish=finish,
        run_s=run, mean_speed=1.0, slow_s=0.0, min_speed=1.0, attempts=1, preemptions=0, evictions=0,
    )  # fmt: skip


def result(records: list[JobRecord], end: float) -> SimResult:
    return SimResult("p", 8, tuple(records), 0.0, end, 0.0, 0.0, (), {}, Timeline())


def test_p99_and_p95_of_known_jcts() -> None:
    # JCTs 1..100 hours: numpy's linear percentiles are 95.05 h and 99.01 h.
    records = [record(i, 1, 0.0, 0.0, (i + 1) * H, (i + 1) * H) for i in range(100)]
    m = summarize(result(records, 100 * H))
    assert m["p95_jct_h"] == pytest.approx(95.05)
    assert m["p99_jct_h"] == pytest.approx(99.01)
    assert m["p99_jct_h"] > m["p95_jct_h"]


def test_worst_queueing_counts_every_wait_per_gpu_bucket() -> None:
    records = [
        record(0, 1, 0.0, 1 * H, 10 * H, 9 * H),  # waited 1 h
        record(1, 1, 2 * H, 2 * H, 20 * H, 12 * H),  # started at once, preempted: 6 h pending
        record(2, 2, 0.0, 3 * H, 5 * H, 2 * H),  # 3 h
        record(3, 3, 0.0, 4 * H, 8 * H, 4 * H),  # 3 GPUs count as the 4-GPU bucket: 4 h
        record(4, 4, 0.0, 1 * H, 6 * H, 5 * H),  # 1 h
        record(5, 8, 0.0, None, None, 0.0),  # never started: pending until the end, 30 h
    ]
    m = summarize(result(records, 30 * H))
    assert m["worst_queue_h_1gpu"] == pytest.approx(6.0)
    assert m["worst_queue_h_2gpu"] == pytest.approx(3.0)
    assert m["worst_queue_h_4gpu"] == pytest.approx(4.0)
    assert m["worst_queue_h_8gpu"] == pytest.approx(30.0)
    assert math.isnan(m["worst_queue_h_more"])  # no job of 9+ GPUs
    assert set(m) == set(METRIC_KEYS)


def test_table_and_json_show_the_tail() -> None:
    records = [record(0, 1, 0.0, 2 * H, 3 * H, 1 * H), record(1, 2, 0.0, 0.0, 1 * H, 1 * H)]
    m = summarize(result(records, 3 * H))
    header, _, row = format_table({"p": m}).splitlines()

    def cell(title: str) -> str:  # cells are right-aligned under their titles
        end = header.index(title) + len(title)
        return row[:end].split()[-1]

    assert cell("p99 h") == f"{m['p99_jct_h']:.2f}"
    assert cell("worst q 1g") == "2.0"  # the 1-GPU job's 2 h wait
    assert cell("2g") == "0.0"
    assert cell("9g+") == "-"  # no job of 9+ GPUs
    assert '"worst_queue_h_more": null' in to_json({"p": m})


def test_unfinished_jobs_are_marked_in_the_table() -> None:
    from horus_core.sim.report import completion_notes

    records = [record(0, 1, 0.0, 2 * H, 3 * H, 1 * H), record(1, 2, 0.0, 0.0, 1 * H, 1 * H)]
    m = summarize(result(records, 3 * H))
    partial, none = {**m, "unfinished": 1}, {**m, "unfinished": 2}
    lines = format_table({"a": m, "b": partial, "c": none}).splitlines()
    assert [line.split()[0] for line in lines[2:5]] == ["a", "b*", "c"] and lines[4].split()[1] == "FAILED"
    assert lines[5:] == completion_notes({"b": partial, "c": none})
    assert lines[5].startswith("b*: 1 of 2 jobs did not finish; its JCT figures count the 1 finished")
