"""The gang attempt's state machine, GPU split, rendezvous port and env (horus_core.gang)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from horus_core import gang
from horus_core.gang import GangInfo, Part, Verdict
from horus_core.model import Job, JobSpec, JobState

NODES = ("n0", "n1", "n2")
_STATES = [JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]
reports = st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(_STATES)), max_size=20)


def _run(events: list[tuple[str, JobState]]) -> list[gang.Outcome]:
    parts, out = gang.start(NODES), []
    for node, state in events:
        o = gang.report(NODES, parts, node, state)
        parts = o.parts
        out.append(o)
    return out


@given(reports)
def test_the_attempt_ends_at_most_once_and_succeeds_only_when_every_part_did(
    events: list[tuple[str, JobState]],
) -> None:
    outcomes = _run(events)
    for o in outcomes:
        if o.verdict is Verdict.SUCCEEDED:
            assert all(p is Part.SUCCEEDED for p in o.parts)
        if o.verdict in (Verdict.FAILED, Verdict.STOPPED):
            assert set(o.stop) == {n for n, p in zip(NODES, o.parts, strict=True) if not p.done}
    assert sum(o.verdict is Verdict.RUNNING for o in outcomes) <= 1
    assert sum(o.verdict is Verdict.SUCCEEDED for o in outcomes) <= 1


@given(reports)
def test_reports_are_idempotent(events: list[tuple[str, JobState]]) -> None:
    parts = gang.start(NODES)
    for node, state in events:
        once = gang.report(NODES, parts, node, state)
        again = gang.report(NODES, once.parts, node, state)
        assert again.parts == once.parts and again.verdict is Verdict.NONE
        parts = once.parts


@given(reports)
def test_a_done_part_never_changes(events: list[tuple[str, JobState]]) -> None:
    parts = gang.start(NODES)
    for node, state in events:
        new = gang.report(NODES, parts, node, state).parts
        for old_p, new_p in zip(parts, new, strict=True):
            assert not old_p.done or new_p is old_p
        parts = new


def test_running_once_every_part_started_then_succeeded_when_all_did() -> None:
    o = _run([("n0", JobState.RUNNING), ("n1", JobState.RUNNING)])
    assert [x.verdict for x in o] == [Verdict.NONE, Verdict.NONE]
    o = _run([("n0", JobState.RUNNING), ("n1", JobState.RUNNING), ("n2", JobState.SUCCEEDED)])
    assert o[-1].verdict is Verdict.RUNNING
    o = _run([(n, JobState.SUCCEEDED) for n in NODES])
    assert [x.verdict for x in o] == [Verdict.NONE, Verdict.NONE, Verdict.SUCCEEDED]


def test_one_failed_part_stops_the_others_that_still_run() -> None:
    o = _run([("n0", JobState.RUNNING), ("n2", JobState.SUCCEEDED), ("n1", JobState.FAILED)])
    assert o[-1].verdict is Verdict.FAILED and o[-1].stop == ("n0",)
    o = _run([("n0", JobState.CANCELLED)])
    assert o[-1].verdict is Verdict.STOPPED and o[-1].stop == ("n1", "n2")


def test_a_report_of_another_node_is_refused() -> None:
    with pytest.raises(ValueError, match="not a report"):
        gang.report(NODES, gang.start(NODES), "elsewhere", JobState.RUNNING)


def test_stored_parts_read_back_and_unknown_ones_read_assigned() -> None:
    parts = (Part.RUNNING, Part.FAILED, Part.ASSIGNED)
    assert gang.parts_of(gang.stored(parts), 3) == parts
    assert gang.parts_of(("bogus",), 2) == (Part.ASSIGNED, Part.ASSIGNED)


@given(st.lists(st.sampled_from(NODES), min_size=1, max_size=12))
def test_split_keeps_rank_order_and_every_gpu(owners: list[str]) -> None:
    # GPUs listed node by node (runs of one node): what a placement hands over
    runs = [n for i, n in enumerate(owners) if i == 0 or owners[i - 1] != n]
    if len(set(runs)) != len(runs):
        with pytest.raises(ValueError, match="rank order"):
            gang.split([f"g{i}" for i in range(len(owners))], {f"g{i}": n for i, n in enumerate(owners)})
        return
    gpus = [f"g{i}" for i in range(len(owners))]
    out = gang.split(gpus, dict(zip(gpus, owners, strict=True)))
    assert [n for n, _ in out] == runs
    assert [g for _, part in out for g in part] == gpus


def test_split_refuses_an_unknown_gpu() -> None:
    with pytest.raises(ValueError, match="no known node"):
        gang.split(["x"], {})


@given(st.text(min_size=1, max_size=8), st.integers(1, 5), st.sets(st.integers(29500, 29509)))
def test_port_is_in_range_deterministic_and_free_when_one_is(
    job_id: str, attempt: int, taken: set[int]
) -> None:
    port = gang.rendezvous_port(job_id, attempt, taken, 29500, 29509)
    assert 29500 <= port <= 29509
    assert port == gang.rendezvous_port(job_id, attempt, taken, 29500, 29509)
    if len(taken) < 10:
        assert port not in taken


def test_port_range_is_checked() -> None:
    with pytest.raises(ValueError, match="port range"):
        gang.rendezvous_port("j", 1, set(), 10, 5)


def test_env_names_what_torchrun_reads() -> None:
    env = dict(
        GangInfo(node_rank=1, nnodes=2, world_size=8, master_addr="10.0.0.1", master_port=29501).env(4)
    )
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "10.0.0.1"
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29501"
    assert (env["WORLD_SIZE"], env["NNODES"], env["NODE_RANK"]) == ("8", "2", "1")
    assert env["LOCAL_WORLD_SIZE"] == env["PET_NPROC_PER_NODE"] == "4"
    assert (env["PET_NNODES"], env["PET_NODE_RANK"]) == ("2", "1")


def test_job_nodes_and_part_active() -> None:
    spec = JobSpec(("x",), gpus=2)
    one = Job("j", spec, JobState.RUNNING, node="a")
    assert gang.job_nodes(one) == ("a",) and not gang.is_gang(one)
    assert gang.part_active(one, (), "a") and not gang.part_active(one, (), "b")
    two = Job("j", spec, JobState.RUNNING, node="a", nodes=("a", "b"))
    assert gang.is_gang(two)
    assert not gang.part_active(two, ("SUCCEEDED", "RUNNING"), "a")
    assert gang.part_active(two, ("SUCCEEDED", "RUNNING"), "b")
