"""Job files: YAML <-> JobSpec, field by field, and every error naming its field and line."""

from __future__ import annotations

import dataclasses

import pytest

from horus_core import jobfile
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec, ProfileHints

FULL = """\
name: resnet-sweep
resources:
  accelerators: V100:2
num_nodes: 1
envs:
  LR: 0.1
  MODE: fast
image: pytorch/pytorch:2.3.0
workdir: /work
run: |
  python train.py --lr $LR
job_type: ResNet-18 (batch size 32)
exclusive: true
priority: 5
hints:
  util_avg: 40
  mem_mib: 4000
"""


def test_full_file_maps_every_field() -> None:
    parsed = jobfile.load(FULL)
    spec = parsed.spec
    assert spec.name == "resnet-sweep"
    assert spec.gpus == 2
    assert spec.env == (("LR", "0.1"), ("MODE", "fast"))
    assert spec.image == "pytorch/pytorch:2.3.0"
    assert spec.workdir == "/work"
    assert spec.command == ("sh", "-c", "python train.py --lr $LR\n")
    assert spec.job_type == "ResNet-18 (batch size 32)"
    assert spec.exclusive is True
    assert spec.priority == 5
    assert spec.hints == ProfileHints(util_avg=40.0, util_peak=None, mem_mib=4000)
    assert spec.gpu_types == ("v100",)  # the type is a placement constraint now, not a warning
    assert parsed.warnings == ()


def test_minimal_file_and_argv_form() -> None:
    spec = jobfile.load("run: [python, -c, 'print(1)']\n").spec
    assert spec.command == ("python", "-c", "print(1)")
    assert spec.gpus == 1
    assert jobfile.load("run: x\nresources: {accelerators: 3}\n").spec.gpus == 3


@pytest.mark.parametrize(
    "spec",
    [
        JobSpec(
            command=("sh", "-c", "python train.py"),
            gpus=2,
            name="a",
            env=(("A", "1"), ("B", "")),
            image="img:1",
        ),
        JobSpec(
            command=("python", "train.py", "--flag=a b"),
            workdir="/w",
            job_type="VGG",
            exclusive=True,
            priority=-3,
            hints=ProfileHints(util_avg=12.5, util_peak=80.0, mem_mib=2048),
            cpus=2.5,
            memory_mib=4096,
            mounts=("/data:/data:ro",),
            total_steps=100,
        ),
        JobSpec(command=("sh", "-c", "echo 'quoted: yes'\nexit 0\n"), name="multi: line #not comment"),
        JobSpec(command=("x",), queue="team-a", priority_class="high", grace_s=90.0),
    ],
)
def test_dump_round_trips(spec: JobSpec) -> None:
    text = jobfile.dump(spec)
    back = jobfile.load(text)
    assert back.spec == spec
    assert back.warnings == ()
    assert jobfile.dump(back.spec) == text


def test_dump_leaves_out_the_owner() -> None:
    spec = JobSpec(command=("x",), owner="alice")
    assert "alice" not in jobfile.dump(spec)
    assert jobfile.load(jobfile.dump(spec)).spec == dataclasses.replace(spec, owner="")


def _error(text: str) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        jobfile.load(text)
    return info.value


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("run: x\nsetup: pip install\n", "setup", ["unknown field", "line 2"]),
        ("run: x\nresources:\n  cloud: aws\n", "resources.cloud", ["unknown field", "line 3"]),
        (
            "run: x\nresources:\n  acelerators: 1\n",
            "resources.acelerators",
            ["unknown field (did you mean `resources.accelerators`?) (line 3)"],
        ),
        ("run: x\naccelerators: 1\n", "accelerators", ["did you mean `resources.accelerators`?"]),
        ("run: x\nenv: {A: b}\n", "env", ["did you mean `envs`?"]),
        ("run: x\nmin_speed: 1.5\n", "min_speed", ["within [0, 1]"]),
        ("run: x\ngrace_s: -1\n", "grace_s", ["within [0, 3600]"]),
        ("run: x\nqueue: [a]\n", "queue", ["line 2"]),
        ("run: x\nnum_nodes: 0\n", "num_nodes", ["at least 1 node", "line 2"]),
        ("run: x\nresources: {accelerators: 'V100:two'}\n", "resources.accelerators", ["V100:2"]),
        ("run: x\npriority: high\n", "priority", ["integer", "line 2"]),
        ("run: x\nexclusive: maybe\n", "exclusive", ["true or false"]),
        ("run: x\nenvs: [A]\n", "envs", ["mapping"]),
        ("run: x\nname: a\nname: b\n", "name", ["given twice", "line 3"]),
        ("name: nothing to run\n", "run", ["missing"]),
        ("run: x\npriority: 5000\n", "priority", ["±"]),
        ("run: x\nenvs: {CUDA-X: 1}\n", "env", ["invalid variable name"]),
        ("- run: x\n", "job file", ["mapping"]),
        ("run: [unclosed\n", "job file", ["not valid YAML"]),
        ("run: x\n---\nrun: y\n", "job file", ["not valid YAML"]),
    ],
)
def test_errors_name_the_field_and_line(text: str, field: str, words: list[str]) -> None:
    err = _error(text)
    assert err.field == field
    for w in words:
        assert w in str(err)


def test_gpus_per_node_checked_against_the_largest_node() -> None:
    with pytest.raises(InvalidArgument, match="largest node has 4"):
        jobfile.load("run: x\nresources: {accelerators: 8}\nnum_nodes: 1\n", max_gpus_per_node=4)
    # without num_nodes the job may span nodes
    assert jobfile.load("run: x\nresources: {accelerators: 8}\n", max_gpus_per_node=4).spec.gpus == 8


def test_num_nodes_makes_accelerators_a_per_node_count() -> None:
    spec = jobfile.load("run: x\nresources: {accelerators: V100:4}\nnum_nodes: 2\n").spec
    assert (spec.gpus, spec.gpus_per_node, spec.nodes) == (8, 4, 2)
    assert jobfile.load(jobfile.dump(spec)).spec == spec


def test_every_supported_field_is_a_table_row() -> None:
    """The mapping is data: each supported path names a real JobSpec attribute (or a hint)."""
    names = {f.name for f in dataclasses.fields(JobSpec)}
    hints = {f.name for f in dataclasses.fields(ProfileHints)}
    for path, field in jobfile.FIELDS.items():
        if field.attr is None:
            continue
        attr = field.attr
        assert attr.removeprefix("hints.") in hints if attr.startswith("hints.") else attr in names, path
