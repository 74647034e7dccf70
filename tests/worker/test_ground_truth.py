"""``--sim-interference``: simulated GPUs whose pair speeds differ from the model's predictions."""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

import pytest

from horus_core.interference import default_model
from horus_core.model import JobSpec
from worker.gpu.base import ProbeTarget
from worker.gpu.ground_truth import GroundTruthModel, PairTruth, load_ground_truth, parse_ground_truth
from worker.gpu.simulated import FallbackModel, SimulatedProbe, parse_fake_gpus, simulated_gpus
from worker.main import StartupError, open_probe, parse_args

A = "ResNet-18 (batch size 32)"
B = "Recommendation (batch size 512)"
C = "ResNet-50 (batch size 64)"


def write(tmp_path: pathlib.Path, doc: Any) -> pathlib.Path:
    path = tmp_path / "truth.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_valid_file() -> None:
    doc = {
        "pairs": [
            {"a": A, "b": B, "speed_a": 0.25, "speed_b": 1},
            {"a": A, "b": A, "speed_a": 0.5, "speed_b": 0.5, "gpu_type": " V100"},
        ]
    }
    assert parse_ground_truth(doc) == [PairTruth(A, B, 0.25, 1.0), PairTruth(A, A, 0.5, 0.5, "v100")]
    assert parse_ground_truth({"pairs": []}) == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "not valid JSON"),
        ([], 'expected an object {"pairs"'),
        ({"pairs": [], "extra": 1}, 'expected an object {"pairs"'),
        ({"pairs": {}}, 'expected an object {"pairs"'),
        ({"pairs": [3]}, r"pairs\[0\]: expected an object"),
        ({"pairs": [{"a": A, "b": B, "speed_a": 0.3}]}, r"pairs\[0\]\.speed_b: expected a number in \(0, 1"),
        ({"pairs": [{"a": A, "b": B, "speed_a": 0, "speed_b": 0.3}]}, r"speed_a: expected a number"),
        ({"pairs": [{"a": A, "b": B, "speed_a": 1.5, "speed_b": 0.3}]}, r"speed_a: expected a number"),
        ({"pairs": [{"a": A, "b": B, "speed_a": True, "speed_b": 0.3}]}, r"speed_a: expected a number"),
        ({"pairs": [{"a": A, "b": B, "speed_a": "0.3", "speed_b": 0.3}]}, r"speed_a: expected a number"),
        ({"pairs": [{"a": "", "b": B, "speed_a": 0.3, "speed_b": 0.3}]}, r"pairs\[0\]\.a: expected a job"),
        ({"pairs": [{"a": A, "b": B, "speed_a": 0.3, "speed_b": 0.3, "speeda": 1}]}, "unknown key 'speeda'"),
        ({"pairs": [{"a": A, "b": B, "speed_a": 0.3, "speed_b": 0.3, "gpu_type": 7}]}, "gpu_type"),
        (
            {
                "pairs": [
                    {"a": A, "b": B, "speed_a": 0.3, "speed_b": 0.3},
                    {"a": B, "b": A, "speed_a": 0.3, "speed_b": 0.3},
                ]
            },
            r"pairs\[1\]: the pair .* is listed twice",
        ),
    ],
)
def test_bad_files_are_refused_with_the_place_named(tmp_path: pathlib.Path, doc: Any, message: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(ValueError, match=message) as err:
        load_ground_truth(path)
    assert str(path) in str(err.value)


def test_a_missing_file_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        load_ground_truth(tmp_path / "nope.json")


def test_ground_truth_replaces_the_models_pair_speeds() -> None:
    base = default_model()
    truth = GroundTruthModel(base, [PairTruth(A, B, 0.25, 0.4), PairTruth(A, C, 0.9, 0.8, "k80")])
    assert base.co_speeds([A, B], "v100") == pytest.approx((1.0, 1.0), abs=0.05)
    assert truth.co_speeds([A, B], "v100") == (0.25, 0.4)
    assert truth.co_speeds([B, A], "v100") == (0.4, 0.25)
    assert truth.co_speeds([A, C], "v100") == base.co_speeds([A, C], "v100")  # k80 only
    assert truth.co_speeds([A, C], "k80") == (0.9, 0.8)
    assert truth.co_speeds([A], "v100") == (1.0,)
    a_with_b_c = truth.co_speeds([A, B, C], "v100")  # products of pair speeds
    assert a_with_b_c[0] == pytest.approx(0.25 * base.co_speeds([A, C], "v100")[0])
    assert truth.signature(JobSpec(("x",), job_type=A)) == A
    # The fallback model's signatures carry the job type as a name.
    fallback = GroundTruthModel(FallbackModel(), [PairTruth("x", "y", 0.5, 0.5)])
    sigs = [fallback.signature(JobSpec(("x",), job_type=t)) for t in ("x", "y")]
    assert fallback.co_speeds(sigs, "v100") == (0.5, 0.5)


async def test_the_probe_slows_jobs_by_the_ground_truth() -> None:
    gpus = simulated_gpus("n", parse_fake_gpus("1"))
    probe = SimulatedProbe(gpus, default_model(), noise=0, ground_truth=[PairTruth(A, B, 0.25, 0.3)])
    targets = [
        ProbeTarget("a", 1, (10,), (gpus[0].uuid,), JobSpec(("x",), job_type=A)),
        ProbeTarget("b", 1, (20,), (gpus[0].uuid,), JobSpec(("x",), job_type=B)),
    ]
    await probe.read(targets)
    assert (probe.speed_of("a", 1), probe.speed_of("b", 1)) == (0.25, 0.3)
    await probe.read(targets[:1])
    assert probe.speed_of("a", 1) == 1.0


def args(*extra: str) -> argparse.Namespace:
    return parse_args(["--master", "127.0.0.1:1", "--name", "w", *extra])


async def test_worker_flag(tmp_path: pathlib.Path) -> None:
    good = write(tmp_path, {"pairs": [{"a": A, "b": B, "speed_a": 0.25, "speed_b": 0.25}]})
    probe, gpus, speed_of = await open_probe(args("--fake-gpus", "1", "--sim-interference", str(good)))
    assert len(gpus) == 1 and speed_of is not None
    await probe.close()
    bad = write(tmp_path, {"pairs": [{"a": A}]})
    with pytest.raises(StartupError, match=r"--sim-interference .*truth\.json: pairs\[0\]\.b"):
        await open_probe(args("--fake-gpus", "1", "--sim-interference", str(bad)))
    with pytest.raises(SystemExit):
        args("--sim-interference", str(good))  # needs --fake-gpus
