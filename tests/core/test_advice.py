"""What a submission is told (horus_core.advice): nearest known names, the warnings, and image
jobs against the workers' runtimes (pure; the live master's use is in tests/master)."""

from __future__ import annotations

import json
from importlib.resources import files

from horus_core.advice import (
    gpu_type_refusal,
    image_refusal,
    is_known_gpu_type,
    nearest,
    runtime_gate,
    submit_warnings,
)
from horus_core.model import Assign, Job, JobSpec, JobState, ProfileHints, Wait
from horus_core.modelcard import ModelCard, card_from_dict


def reference_card() -> ModelCard:
    cards = json.loads((files("horus_core") / "data" / "reference_cards.json").read_text())
    first = next(iter(cards.values())) if isinstance(cards, dict) else cards[0]
    return card_from_dict(first)


TYPES = ["ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)", "LM (batch size 5)"]


def test_nearest_finds_names_by_their_letters_and_digits_then_by_spelling() -> None:
    assert nearest("resnet18", TYPES) == ["ResNet-18 (batch size 32)"]
    assert nearest("vv100", ["v100", "k80"], 1) == ["v100"]
    assert nearest("zzz", TYPES) == [] and nearest("--", TYPES) == []


def test_warnings_only_for_what_may_not_run_as_meant() -> None:
    def known(t: str) -> bool:
        return t in TYPES

    assert (
        submit_warnings(JobSpec(("x",), job_type=TYPES[0], gpu_types=("v100",)), known, TYPES, {"v100"}) == []
    )
    hinted = JobSpec(("x",), job_type="mine", hints=ProfileHints(util_avg=30.0))
    assert submit_warnings(hinted, known, TYPES, {"v100"}) == []
    carded = JobSpec(("x",), job_type="mine", model_card=reference_card())  # the card is its profile
    assert submit_warnings(carded, known, TYPES, {"v100"}) == []
    assert len(submit_warnings(JobSpec(("x",), job_type="mine"), known, TYPES, {"v100"})) == 1
    assert submit_warnings(JobSpec(("x",), gpu_types=("a100",)), known, TYPES, set()) == []  # no node yet
    assert submit_warnings(JobSpec(("x",), gpu_types=("v100", "a100")), known, TYPES, {"v100"}) == []
    (one,) = submit_warnings(JobSpec(("x",), gpu_types=("v100", "a10o")), known, TYPES, {"v100"})
    assert "unknown GPU type 'a10o' (the cluster has v100); did you mean 'a10' or " in one
    assert one.endswith("it is skipped until such a node joins")
    (wait,) = submit_warnings(JobSpec(("x",), gpu_types=("a100",)), known, TYPES, {"v100"})
    assert wait.startswith("no node has GPU type 'a100' (the cluster has v100):") and "did you" not in wait


def test_a_job_whose_every_gpu_type_is_unknown_is_refused_with_the_nearest_names() -> None:
    def refused(*types: str, have: frozenset[str] = frozenset({"v100"})) -> str | None:
        return gpu_type_refusal(JobSpec(("x",), gpu_types=types), have)

    assert refused("v100") is None and refused() is None
    assert refused("a100") is None and refused("h100-3g.40gb") is None  # known, though no node has one
    assert refused("v100", "v10o") is None  # (warned: it may run on the V100s)
    assert refused("gb300", have=frozenset({"gb300"})) is None  # a registered node's type
    why = refused("v10o")
    assert why is not None and why.startswith(
        "unknown GPU type 'v10o'; did you mean 'v100'? (the cluster has v100;"
    )
    assert "known GPU types: k80, p100, v100" in why
    two = refused("zz1", "zz2", have=frozenset())
    assert two is not None and two.startswith("unknown GPU types 'zz1', 'zz2' (no node has registered yet;")
    assert is_known_gpu_type("a100-1g.5gb-me") and not is_known_gpu_type("b9000-1g.5gb")


def test_an_image_needs_a_docker_worker() -> None:
    spec = JobSpec(("x",), image="busybox:1")
    assert image_refusal(spec, {"process"}) is not None
    assert image_refusal(spec, {"process", "docker"}) is None and image_refusal(spec, set()) is None
    assert image_refusal(JobSpec(("x",)), {"process"}) is None
    jobs = {"i": Job("i", spec, JobState.PENDING), "p": Job("p", JobSpec(("x",)), JobState.PENDING)}
    actions = [Assign("i", "n1", ("g0",)), Assign("p", "n1", ("g1",)), Assign("i2", "n2", ("g2",))]
    out = runtime_gate(actions, jobs.get, {"n1"}, {"g0": "n1", "g1": "n1", "g2": "n2"})  # type: ignore[arg-type]
    assert isinstance(out[0], Wait) and "n1 runs jobs as processes" in out[0].reason
    assert out[1:] == actions[1:]  # a plain job, and a job the lookup does not know
