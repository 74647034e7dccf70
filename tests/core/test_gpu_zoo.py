"""The model zoo of ``scripts/gpu-check --zoo`` on a simulated GPU: the real measuring script
(``scripts/gpu_zoo.py``, a subprocess training real torchvision models on the CPU) and the
predictor's training path on what it wrote. Needs the describe extra (torch): skips without it,
fails under HORUS_REQUIRE_TORCH=1 (.ci/run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("HORUS_REQUIRE_TORCH") != "1":
    pytest.importorskip("torch", reason="the describe extra (torch) is not installed")

from horus_core.describe.zoo import ZOO, ZOO_MODELS, zoo_references
from horus_core.interference.predictor import packaged_predictor, predictor_from_dict
from horus_core.interference.train import load_zoo
from horus_core.interference.train import main as train_main
from horus_core.modelcard import card_from_dict

ROOT = Path(__file__).resolve().parents[2]
MODELS = "squeezenet1_1,mobilenet_v3_small,shufflenet_v2_x0_5,resnet18"


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("zoo")
    argv = [sys.executable, str(ROOT / "scripts" / "gpu_zoo.py"), "--out", str(out), "--simulate", "v100"]
    argv += ["--device", "cpu", "--size", "32", "--batches", "2,4", "--models", MODELS + ",alexnet"]
    argv += ["--window-s", "0.1", "--warmup", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(x) for x in (out / "zoo.jsonl").read_text().splitlines()]
    return out / "zoo.jsonl", lines


def test_the_zoo_spans_forty_models_of_eight_families_at_two_batches() -> None:
    assert len(ZOO_MODELS) >= 40
    assert len({family for _, family in ZOO_MODELS}) >= 8
    assert len(ZOO) == 2 * len(ZOO_MODELS)
    with pytest.raises(ValueError, match="not in the zoo: resnet181"):
        zoo_references(("resnet181",))


def test_each_model_is_profiled_with_its_card_or_its_error(
    zoo_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, lines = zoo_run
    asked = {*MODELS.split(","), "alexnet"}
    assert [(x["model"], x["batch"]) for x in lines] == [
        (m, b) for m, _ in ZOO_MODELS if m in asked for b in (2, 4)
    ]
    done = [x for x in lines if "util_avg" in x]
    assert len(done) == 8
    for x in done:
        card = card_from_dict(x["card"])
        assert card.batch == x["batch"] and card.input_shape == (3, 32, 32)
        assert 0 < x["util_avg"] <= x["util_peak"] <= 100
        assert x["mem_mib"] > (card.static_bytes + card.activation_bytes) >> 20
        assert x["steps_per_s"] > 0 and x["gpu"] == "v100"
    # alexnet's pooling cannot take 32x32 images: that model fails, the others are kept
    assert {x["model"] for x in lines if "error" in x} == {"alexnet"}
    # a larger batch of the same model does more work per step: a busier simulated GPU
    by = {(x["model"], x["batch"]): x["util_avg"] for x in done}
    assert all(by[(m, 4)] >= by[(m, 2)] for m in MODELS.split(","))


def test_the_predictor_retrains_on_the_zoo_and_reports_held_out_error(
    zoo_run: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    path, _ = zoo_run
    printed: list[str] = []
    train_main(["--zoo", str(path), "--report"], emit=printed.append)
    folds = [json.loads(x) for x in printed]
    assert [f["family"] for f in folds] == ["mobilenet", "resnet", "shufflenet", "squeezenet", "all"]
    summary = folds[-1]
    assert summary["models"] == 8 and summary["paper_util_rmsle"] == 0.154
    # trained on the zoo's other families, the model beats predicting their mean utilisation
    assert summary["util_rmsle"] < summary["util_rmsle_mean"]
    out = tmp_path / "predictor.json"
    train_main(["--zoo", str(path), "--out", str(out)], emit=printed.append)
    assert "8 zoo profiles" in printed[-1]
    retrained = predictor_from_dict(json.loads(out.read_text()))
    zoo = load_zoo([path])
    card = zoo.cards[zoo.names.index("torchvision:resnet18 (batch size 4)")]
    assert retrained.predict(card).util_avg != packaged_predictor().predict(card).util_avg


def test_a_bad_zoo_file_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "zoo.jsonl"
    bad.write_text(json.dumps({"card": {}, "util_avg": 5, "gpu": "v100"}) + "\n")
    with pytest.raises(SystemExit) as exit_:
        train_main(["--zoo", str(bad), "--report"])
    assert exit_.value.code == 2
    assert f"--zoo: {bad}:1:" in capsys.readouterr().err
