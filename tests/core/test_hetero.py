"""GPU types a job accepts (``JobSpec.gpu_types``) end to end, and heterogeneity-aware horus."""

from __future__ import annotations

import argparse

import pytest

from horus_core import jobfile, wire
from horus_core.cli.submit import build_spec, register
from horus_core.errors import InvalidArgument
from horus_core.interference import default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, Wait
from horus_core.policies import make_policy, policy_names
from horus_core.policies.gputypes import HeteroRule, allowed_types
from horus_core.validation import validate_spec
from master.store.rows import spec_from_dict, spec_to_json

R18_16 = "ResNet-18 (batch size 16)"
R50_128 = "ResNet-50 (batch size 128)"  # throughput 0 on K80 at 2 GPUs in the table
MEM = {"k80": 11441, "v100": 16160}


def node(name: str, gtype: str, n: int = 4) -> Node:
    gpus = tuple(Gpu(f"{name}g{i}", name, i, gtype.upper(), MEM[gtype], gtype) for i in range(n))
    return Node(name, gpus)


CLUSTER = (node("k", "k80"), node("v", "v100"))
TYPE_OF = {g.uuid: g.gpu_type for n in CLUSTER for g in n.gpus}


def job(jid: str, types: tuple[str, ...] = (), job_type: str = R18_16, gpus: int = 1, at: float = 0.0) -> Job:
    spec = JobSpec(("train",), gpus=gpus, job_type=job_type, gpu_types=types)
    return Job(jid, spec, JobState.PENDING, submitted_at=at)


def on(jid: str, uuids: tuple[str, ...], job_type: str = R18_16) -> Job:
    spec = JobSpec(("train",), gpus=len(uuids), job_type=job_type, exclusive=True)
    return Job(jid, spec, JobState.RUNNING, attempt=1, node=uuids[0][0], gpus=uuids, version=1)


def by_id(actions: list[Action]) -> dict[str, Action]:
    return {a.job_id: a for a in actions}


# ------------------------------------------------------------------------- the field itself

SPEC = JobSpec(("python", "t.py"), gpus=2, gpu_types=("v100", "a100"))


def test_wire_round_trip() -> None:
    assert wire.spec_from_pb(wire.spec_to_pb(SPEC)) == SPEC
    assert wire.spec_from_pb(wire.spec_to_pb(JobSpec(("x",)))).gpu_types == ()


def test_store_round_trip_and_old_rows_read_as_any_type() -> None:
    import json

    assert spec_from_dict(json.loads(spec_to_json(SPEC))) == SPEC
    old = json.loads(spec_to_json(SPEC))
    del old["gpu_types"]
    assert spec_from_dict(old).gpu_types == ()


def test_jobfile_sets_types_and_dumps_them_back() -> None:
    parsed = jobfile.load("run: x\nresources: {accelerators: 'V100,A100:2'}\n")
    assert (parsed.spec.gpus, parsed.spec.gpu_types, parsed.warnings) == (2, ("v100", "a100"), ())
    assert jobfile.load(jobfile.dump(parsed.spec)).spec == parsed.spec


def test_hctl_submit_flag() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    args = parser.parse_args(["submit", "--gpus", "1", "--gpu-type", "V100, a100", "x"])
    args.command_argv = []
    assert build_spec(args).gpu_types == ("v100", "a100")


@pytest.mark.parametrize(
    "types", [("V100",), ("v100", "v100"), ("",), tuple(f"t{i}" for i in range(17)), ("a" * 40,)]
)
def test_bad_types_are_refused(types: tuple[str, ...]) -> None:
    with pytest.raises(InvalidArgument, match="gpu_types"):
        validate_spec(JobSpec(("x",), gpu_types=types))


# ------------------------------------------------------------------------- every policy


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_places_a_job_only_on_its_types(name: str) -> None:
    jobs = (job("to-k80", ("k80",)), job("to-v100", ("v100",), at=1.0), job("nowhere", ("a100",), at=2.0))
    acts = by_id(make_policy(name).decide(ClusterSnapshot(CLUSTER, jobs), 10.0))
    for jid, want in (("to-k80", "k80"), ("to-v100", "v100")):
        act = acts[jid]
        if isinstance(act, Assign):
            assert {TYPE_OF[u] for u in act.gpus} == {want}
        else:  # a policy may hold a job back (a round's share), never on the wrong type
            assert isinstance(act, Wait)
    assert any(isinstance(a, Assign) for a in acts.values())
    nowhere = acts["nowhere"]
    assert isinstance(nowhere, Wait) and nowhere.reason == "no GPU of type a100 in the cluster"


@pytest.mark.parametrize("name", [n for n in policy_names() if not n.startswith("gavel")])
def test_no_policy_places_a_job_where_the_table_says_it_cannot_run(name: str) -> None:
    assert default_model().solo_throughput(R50_128, 2, "k80") == 0.0
    cluster = (node("k", "k80"),)
    act = by_id(make_policy(name).decide(ClusterSnapshot(cluster, (job("r50", (), R50_128, 2),)), 10.0))[
        "r50"
    ]
    assert isinstance(act, Wait) and act.reason == "cannot run on k80 (throughput 0 in the table)"


def test_gavel_gives_a_type_outside_the_list_no_throughput() -> None:
    from horus_core.policies.gavel.classes import build_problem

    jobs = [job("a", ("k80",)), job("b")]
    model = default_model()
    problem = build_problem(jobs, {"k80": 4, "v100": 4}, model.solo_throughput, lambda j: R18_16)
    rows = {c.members: list(problem.throughput[i]) for i, c in enumerate(problem.classes)}
    assert rows[("a",)][1] == 0.0 and rows[("a",)][0] > 0
    assert all(x > 0 for x in rows[("b",)])


# ------------------------------------------------------------------------- heterogeneity-aware horus


def test_tiers_put_the_fast_type_first_and_the_slow_one_after_the_wait() -> None:
    model = default_model()
    k80, v100 = (model.solo_throughput(R18_16, 1, t) or 0.0 for t in ("k80", "v100"))
    assert k80 < 0.5 * v100  # the premise: much slower on K80
    rule = HeteroRule(max_wait_s=600.0)
    present = frozenset({"k80", "v100"})
    assert allowed_types(job("a"), present, model, 10.0, rule).tiers == (frozenset({"v100"}),)
    assert allowed_types(job("a"), present, model, 600.0, rule).tiers == (frozenset({"v100"}), None)
    assert allowed_types(job("a"), present, model, 10.0, None).tiers == (None,)


@pytest.mark.parametrize("name", ["horus", "horus+", "lucid", "gandiva"])
def test_hetero_policies_prefer_the_fast_type_and_wait_for_it_while_it_frees_soon(name: str) -> None:
    policy = make_policy(name)
    free = by_id(policy.decide(ClusterSnapshot(CLUSTER, (job("a"),)), 10.0))["a"]
    assert isinstance(free, Assign) and TYPE_OF[free.gpus[0]] == "v100"
    busy = tuple(on(f"r{i}", (f"vg{i}",)) for i in range(4))
    waits = by_id(policy.decide(ClusterSnapshot(CLUSTER, (*busy, job("a"))), 10.0))["a"]
    assert isinstance(waits, Wait)
    late = by_id(policy.decide(ClusterSnapshot(CLUSTER, (*busy, job("a"))), HeteroRule().max_wait_s + 1.0))[
        "a"
    ]
    assert isinstance(late, Assign) and TYPE_OF[late.gpus[0]] == "k80"


def test_fast_tier_holds_every_type_within_the_band() -> None:
    # ResNet-18 bs 16 in the table: P100 35.9, V100 32.4 (0.90 of it), K80 4.8 steps/s.
    model, present = default_model(), frozenset({"k80", "p100", "v100"})
    both = frozenset({"p100", "v100"})
    assert allowed_types(job("a"), present, model, 10.0, HeteroRule()).tiers == (both,)


def test_blind_horus_paper_takes_the_slow_type_at_once() -> None:
    busy = tuple(on(f"r{i}", (f"vg{i}",)) for i in range(4))
    act = by_id(make_policy("horus-paper").decide(ClusterSnapshot(CLUSTER, (*busy, job("a"))), 10.0))["a"]
    assert isinstance(act, Assign) and TYPE_OF[act.gpus[0]] == "k80"


@pytest.mark.parametrize("name", ["fifo", "binpack", "horus", "horus-util", "horus-las", "lucid", "gandiva"])
def test_a_gang_over_nodes_of_one_type_in_a_mixed_cluster_is_answered(name: str) -> None:
    """Three 1-GPU nodes, two V100 and one K80, and a 2-GPU job: it can only run over the two
    V100 nodes. Every packing policy places it there (the type gate once dropped such an Assign
    as "outside the view" because its GPUs were not all on its first node, leaving no answer)."""
    cluster = (node("a", "v100", 1), node("b", "v100", 1), node("c", "k80", 1))
    actions = make_policy(name).decide(ClusterSnapshot(cluster, (job("g", gpus=2, job_type=R18_16),)), 0.0)
    (got,) = actions
    assert isinstance(got, Assign) and sorted(got.gpus) == ["ag0", "bg0"]
