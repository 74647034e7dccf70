"""The multi-node shape of a job spec: gpus_per_node x nodes (horus_core.validation.check_shape)."""

from __future__ import annotations

import re

import pytest

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from horus_core.validation import validate_spec


def test_a_job_without_a_shape_may_ask_more_than_one_node_has() -> None:
    spec = JobSpec(("x",), gpus=16)
    assert validate_spec(spec, max_gpus_per_node=8) is spec


def test_a_full_shape_must_multiply_out() -> None:
    assert validate_spec(JobSpec(("x",), gpus=8, gpus_per_node=4, nodes=2), max_gpus_per_node=4)
    with pytest.raises(InvalidArgument, match=r"gpus \(8\) must equal gpus_per_node \(4\) x nodes \(3\)"):
        validate_spec(JobSpec(("x",), gpus=8, gpus_per_node=4, nodes=3))


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (JobSpec(("x",), gpus=8, gpus_per_node=3), "multiple of gpus_per_node (3)"),
        (JobSpec(("x",), gpus=8, nodes=3), "multiple of nodes (3)"),
        (JobSpec(("x",), gpus=8, nodes=-1), "must not be negative"),
        (JobSpec(("x",), gpus=8, gpus_per_node=-2), "must not be negative"),
        (JobSpec(("x",), gpus=8, nodes=1), "8 GPUs on one node but the largest node has 4"),
        (JobSpec(("x",), gpus=8, gpus_per_node=8), "8 GPUs on one node but the largest node has 4"),
        (JobSpec(("x",), gpus=4, gpus_min=2, gpus_max=8, nodes=2), "elastic job runs on one node"),
        (JobSpec(("x",), gpus=6, gpus_min=6, gpus_max=8), "6 GPUs on one node"),
    ],
)
def test_bad_shapes_are_refused_with_a_clear_message(spec: JobSpec, words: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(words)):
        validate_spec(spec, max_gpus_per_node=4)
