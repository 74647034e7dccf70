"""Reason codes: every policy's Waits carry one from the vocabulary, the packing classification
agrees one job at a time and in bulk, the master's refinement to NodeCordoned, queue positions,
the out-of-service rules, and docs/reasons.md saying what the code says."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from horus_core import reasoncodes as rc
from horus_core import service as rules
from horus_core.errors import InvalidArgument
from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, NodeState, Wait
from horus_core.packing import PackParams, codes
from horus_core.policies import make_policy, policy_names
from horus_core.policies.reasons import (
    WaitFacts,
    wait_code,
    wait_codes,
    wait_reason,
)
from horus_core.testing import gpu, nodes, pending, running

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reasons.md"
R18 = "ResNet-18 (batch size 32)"


@pytest.mark.parametrize("name", policy_names())
def test_every_policys_waits_carry_a_code(name: str) -> None:
    jobs = (
        running("r", R18, ("n0g0",), exclusive=True),
        pending("big", R18, gpus=5),  # more than the whole cluster has (a gang may span nodes)
        *(pending(f"p{i}", R18, at=float(i)) for i in range(6)),  # more than the cluster holds
    )
    actions = make_policy(name).decide(ClusterSnapshot(nodes(2, 2), jobs), 10.0)
    waits = [a for a in actions if isinstance(a, Wait)]
    assert waits, "something must wait"
    assert all(w.code in rc.CODES for w in waits), [(w.job_id, w.code, w.reason) for w in waits]
    assert next(w.code for w in waits if w.job_id == "big") in (rc.GANG_TOO_LARGE, rc.PRIORITY)


def test_no_gpu_of_an_accepted_type_says_so() -> None:
    job = Job("t", JobSpec(command=("x",), gpu_types=("h100",)), JobState.PENDING)
    for name in ("fifo", "horus", "gavel-las"):
        (w,) = make_policy(name).decide(ClusterSnapshot(nodes(1, 2), (job,)), 0.0)
        assert isinstance(w, Wait) and w.code == rc.GPU_TYPE_UNAVAILABLE, (name, w)


facts = st.builds(
    WaitFacts,
    gpus=st.integers(1, 8),
    exclusive=st.booleans(),
    mem_mib=st.integers(0, 40000),
    code=st.sampled_from(
        [codes.R_NO_GPUS, codes.R_LOOKAHEAD, codes.R_GANG, codes.R_FULL, codes.R_MEMORY, 99]
    ),
    detail=st.integers(0, 8),
    largest_node=st.integers(0, 8),
    blocked_ahead=st.integers(0, 50),
)


@given(st.lists(facts, min_size=1, max_size=20))
def test_bulk_codes_match_one_at_a_time(many: list[WaitFacts]) -> None:
    for largest in {f.largest_node for f in many}:
        group = [f for f in many if f.largest_node == largest]
        bulk = wait_codes(
            np.array([f.code for f in group], dtype=np.int32),
            np.array([f.gpus for f in group], dtype=np.int32),
            largest,
        )
        assert bulk == [wait_code(f) for f in group]


def test_codes_follow_the_sentence() -> None:
    def both(**kw: int) -> tuple[str, str]:
        f = WaitFacts(**{"gpus": 1, "exclusive": False, "mem_mib": 100, "detail": 0, "largest_node": 4,
                         "blocked_ahead": 0, **kw})  # type: ignore[arg-type]  # fmt: skip
        return wait_code(f), wait_reason(f, PackParams(), "refused")

    assert both(code=codes.R_NO_GPUS) == (rc.NO_READY_NODES, "no ready GPU in the cluster")
    assert both(code=codes.R_FULL, gpus=8)[0] == rc.GANG_TOO_LARGE
    assert both(code=codes.R_LOOKAHEAD)[0] == rc.PRIORITY
    assert both(code=codes.R_MEMORY)[0] == both(code=codes.R_FULL)[0] == rc.RESOURCES
    assert both(code=99) == (rc.INTERFERENCE, "refused")


def cordoned(name: str, n: int, state: NodeState = NodeState.CORDONED) -> Node:
    return Node(name, tuple(gpu(name, i) for i in range(n)), state)


def test_refine_names_the_cordon_only_where_it_holds_the_room() -> None:
    w = Wait("j", "needs 2 GPUs", rc.RESOURCES)
    ready = nodes(1, 2)
    assert rc.refine(w, 2, rc.out_of_service(ready, ())) == rc.RESOURCES  # nothing out of service
    withheld = rc.out_of_service((*ready, cordoned("c", 2)), ())
    assert withheld == rc.OutOfService(largest_node=2, idle_gpus=2, idle_on_one_node=2)
    assert rc.refine(w, 2, withheld) == rc.NODE_CORDONED
    assert rc.refine(w, 3, withheld) == rc.RESOURCES  # the cordoned node would not fit it either
    busy = rc.out_of_service((cordoned("c", 2),), (running("r", R18, ("cg0", "cg1"), node="c"),))
    assert rc.refine(w, 1, busy) == rc.RESOURCES  # its GPUs are in use anyway
    gang = Wait("j", "too big", rc.GANG_TOO_LARGE)
    assert (
        rc.refine(gang, 4, rc.out_of_service((cordoned("c", 4, NodeState.DRAINING),), ())) == rc.NODE_CORDONED
    )
    assert rc.refine(Wait("j", "x", rc.INTERFERENCE), 1, withheld) == rc.INTERFERENCE
    assert rc.refine(Wait("j", "x"), 1, rc.OutOfService()) == rc.RESOURCES  # uncoded: Resources


def test_busy_or_scattered_cordoned_gpus_are_no_reason_to_say_node_cordoned() -> None:
    """(Issue 39: a job re-queued to run alone said NodeCordoned while every GPU was in use.)"""
    w = Wait("j", "needs a GPU to itself", rc.RESOURCES)
    c = cordoned("c", 2)
    stopping = rc.out_of_service((c,), (running("r", R18, ("cg0",), node="c"),), stopping=("cg1",))
    assert rc.refine(w, 1, stopping) == rc.RESOURCES  # one GPU runs a job, the other a stopping attempt
    assert rc.refine(w, 1, rc.out_of_service((c,), (running("r", R18, ("cg0",), node="c"),))) == (
        rc.NODE_CORDONED  # the other one is idle: uncordoning would start it
    )
    halves = (running("r1", R18, ("ag0",), node="a"), running("r2", R18, ("bg0",), node="b"))
    scattered = rc.out_of_service((cordoned("a", 2), cordoned("b", 2)), halves)
    assert (scattered.idle_gpus, scattered.idle_on_one_node) == (2, 1)
    assert rc.refine(w, 2, scattered) == rc.RESOURCES  # 2 idle GPUs, but never 2 on one node
    assert rc.refine(w, 2, scattered, spans=True) == rc.NODE_CORDONED  # a 2-node gang would fit them
    assert rc.refine(w, 3, scattered, spans=True) == rc.RESOURCES


def test_out_of_service_counts_quarantined_gpus_and_skips_lost_nodes() -> None:
    q = Gpu("qg0", "q", 0, "V100", 16384, "v100", healthy=False, quarantine="Xid 79")
    node = Node("q", (q, gpu("q", 1)), NodeState.READY)
    lost = cordoned("l", 8, NodeState.LOST)
    assert rc.out_of_service((node, lost), ()) == rc.OutOfService(
        largest_node=2, idle_gpus=1, idle_on_one_node=1
    )
    assert rc.out_of_service((lost,), ()) == rc.OutOfService()


def test_queue_positions_count_per_queue_in_the_policys_order() -> None:
    jobs = {j.id: j for j in (pending("a"), pending("b"), pending("c"))}
    waits = [Wait("c", "x"), Wait("a", "x"), Wait("zzz", "unknown"), Wait("c", "twice")]
    assert rc.queue_positions(waits, jobs.get) == {"c": ("default", 1), "a": ("default", 2)}
    listing = rc.queue_listing(
        list(jobs.values()), lambda j: {"c": ("default", 1), "a": ("default", 2)}.get(j.id)
    )
    assert [(q, i, j.id) for q, i, j in listing] == [
        ("default", 1, "c"),
        ("default", 2, "a"),
        ("default", 3, "b"),
    ]


def test_gpu_faults() -> None:
    assert rules.gpu_fault(0, (), 0) == ""
    assert rules.gpu_fault(0, (13, 31, 43), 0) == ""  # the application's own doing
    assert rules.gpu_fault(0, (79, 13, 48, 79), 0) == "Xid 48, 79"
    assert rules.gpu_fault(5, (), 5) == ""  # seen before the last release
    assert rules.gpu_fault(7, (), 5) == "2 new uncorrected ECC error(s)"


def test_drain_deadline_and_preempts() -> None:
    assert rules.drain_deadline(100.0, None) == 100.0
    assert rules.drain_deadline(100.0, 30) == 130.0
    for bad in (-1.0, math.nan, math.inf, rules.MAX_DRAIN_TIMEOUT_S + 1):
        with pytest.raises(InvalidArgument):
            rules.drain_deadline(0.0, bad)
    jobs = (running("a", R18, ("n0g0",), node="n0"), running("b", R18, ("n1g0",), node="n1"), pending("p"))
    assert rules.drain_preempts({"n0": 50.0}, jobs, 49.9) == []
    assert [p.job_id for p in rules.drain_preempts({"n0": 50.0}, jobs, 50.0)] == ["a"]


def test_docs_table_is_the_vocabulary() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.+?) \|$", DOCS.read_text(), re.MULTILINE)
    assert {code: (meaning, todo) for code, meaning, todo in rows} == rc.VOCABULARY


def test_positions_count_per_queue_once_specs_name_queues() -> None:
    specs = {"a": "team-a", "b": "", "c": "team-a"}
    jobs = {k: Job(k, JobSpec(command=("x",), queue=q), JobState.PENDING) for k, q in specs.items()}
    waits = [Wait("c", "x"), Wait("b", "x"), Wait("a", "x"), Wait("zzz", "x")]
    assert rc.queue_positions(waits, jobs.get) == {
        "c": ("team-a", 1),
        "b": ("default", 1),
        "a": ("team-a", 2),
    }
    lazy = rc.QueuePositions(waits, jobs.get)
    assert (lazy.get("a"), lazy.get("zzz")) == (("team-a", 2), None)
