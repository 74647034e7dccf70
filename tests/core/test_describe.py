"""Describing real PyTorch models (the describe extra): counts against torch's own run on the CPU,
the CLI, and the shipped reference cards. CI installs torch; where it is absent these skip, unless
HORUS_REQUIRE_TORCH=1 (set by .ci/run) makes that a failure."""

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

import torch
from torch.utils.flop_counter import FlopCounterMode

from horus_core.cli.main import main as hctl_main
from horus_core.describe import DescribeError, describe, describe_named, parse_shape
from horus_core.describe.cards import PACKAGED, cards_text, reference_cards
from horus_core.modelcard import card_to_dict, parse_card


class Tiny(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.act = torch.nn.ReLU()
        self.rnn = torch.nn.GRU(8, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 5)
        self.embed = torch.nn.Embedding(10, 4)

    def forward(self, x: Any) -> Any:
        y = self.act(self.norm(self.conv(x)))  # (b, 8, 6, 6)
        seq = y.flatten(2).transpose(1, 2)  # (b, 36, 8)
        out, _ = self.rnn(seq)
        return self.head(out[:, -1])


def _cpu_flops(module: Any, x: Any) -> tuple[int, int]:
    with FlopCounterMode(display=False) as counter:
        out = module(x)
        forward = counter.get_total_flops()
        out.float().sum().backward()
    return forward, counter.get_total_flops()


def test_counts_match_torch_on_the_cpu_and_leave_the_module_alone() -> None:
    module = Tiny()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    x = torch.randn(4, 3, 6, 6)
    card = describe(module, x, model="tiny", optimizer="adam")
    forward, step = _cpu_flops(Tiny(), x)
    assert card.flops_forward == forward and card.flops_step == step
    assert card.batch == 4 and card.input_shape == (3, 6, 6)
    n = sum(p.numel() for p in module.parameters())
    assert card.params == n and card.param_bytes == 4 * n == card.grad_bytes
    assert card.optimizer_bytes == 2 * 4 * n
    assert dict(card.layers) == {
        "conv": 1,
        "linear": 1,
        "recurrent": 1,
        "norm": 1,
        "embedding": 1,
        "activation": 1,
    }
    assert card.activation_bytes > 4 * 3 * 6 * 6 * 4  # at least the saved input
    assert card.ops_step > 10 and card.described_with.endswith("on meta")
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert next(module.parameters()).device.type == "cpu" and next(module.parameters()).grad is None
    assert describe(module, x, optimizer="sgd").optimizer_bytes == 0
    assert describe(module, x, optimizer="sgd-momentum").optimizer_bytes == 4 * n


def test_half_precision_and_amp_count_activations_at_two_bytes() -> None:
    module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
    x = torch.randn(32, 64)
    full = describe(module, x)
    amp = describe(module, x, dtype="bfloat16", amp=True)
    half = describe(module, x, dtype="float16")
    assert amp.activation_bytes == full.activation_bytes // 2
    assert amp.param_bytes == full.param_bytes and half.param_bytes == full.param_bytes // 2
    assert (amp.amp, amp.dtype, half.dtype) == (True, "bfloat16", "float16")


def test_grouped_convolution_backward_is_counted_per_group() -> None:
    for groups in (1, 16):
        conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=groups)
        card = describe(conv, torch.zeros(2, 16, 8, 8))
        assert card.flops_step == 2 * card.flops_forward  # forward + the weight gradient


def test_a_model_meta_tensors_cannot_run_is_described_on_the_cpu() -> None:
    class Branchy(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            return self.lin(x) * (2.0 if float(x.abs().sum().item()) >= 0 else 1.0)

    card = describe(Branchy(), torch.randn(3, 4))
    assert card.described_with.endswith("on cpu") and card.flops_forward == 2 * 3 * 4 * 4
    with pytest.raises(DescribeError, match="no floating-point tensor"):
        describe(torch.nn.Embedding(5, 3).requires_grad_(False), torch.zeros(2, 1, dtype=torch.int64))


def test_named_models_and_files(tmp_path: Path) -> None:
    card = describe_named("torchvision:resnet18", batch=32, input_shape=(3, 32, 32))
    assert card.model == "torchvision:resnet18" and card.params == 11_689_512
    assert 2.2e9 < card.flops_forward < 2.6e9  # 0.56 GMAC per 32x32 image at this stem, x2, x32
    source = tmp_path / "mymodel.py"
    source.write_text(
        "import torch\n\n\ndef build():\n"
        "    return torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Linear(8, 2))\n"
    )
    tokens = describe_named(
        f"{source}:build", batch=5, input_shape=(7,), input_dtype="int64", optimizer="sgd"
    )
    assert tokens.layer_count("embedding") == 1 and tokens.flops_forward == 2 * 5 * 7 * 8 * 2
    for bad, message in (
        ("torchvision:resnet", "no model 'resnet'"),
        (f"{tmp_path}/missing.py:build", "no such file"),
        (f"{source}:nothing", "no function 'nothing'"),
        ("resnet18", "expected torchvision:NAME"),
    ):
        with pytest.raises(DescribeError, match=message):
            describe_named(bad, batch=1, input_shape=(3, 32, 32))
    assert parse_shape("3x224X224") == (3, 224, 224)
    with pytest.raises(DescribeError, match="expected dimensions"):
        parse_shape("3,224")


def test_hctl_describe_prints_and_writes_the_card(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hctl = [sys.executable, "-m", "horus_core.cli"]
    args = ["describe", "torchvision:resnet18", "--batch", "32", "--input", "3x32x32"]
    shown = subprocess.run([*hctl, *args], capture_output=True, text=True, timeout=120, check=True)
    card = parse_card(shown.stdout)
    assert card.batch == 32 and card.input_shape == (3, 32, 32) and card.flops_step > card.flops_forward
    out = tmp_path / "card.json"
    assert hctl_main([*args, "-o", str(out)]) == 0
    assert parse_card(out.read_text()) == card
    assert hctl_main(["describe", "torchvision:nope", "--batch", "1", "--input", "3"]) == 2
    assert "no model 'nope'" in capsys.readouterr().err
    assert hctl_main(["describe", "resnet181", *args[2:]]) == 2  # (issue 39: a bare name, misspelt)
    assert "did you mean torchvision:resnet18 (or " in capsys.readouterr().err
    assert hctl_main(["describe", "torchvision:resnet181", *args[2:]]) == 2
    assert "torchvision has no model 'resnet181' (did you mean resnet18, " in capsys.readouterr().err


def test_the_shipped_reference_cards_are_what_describe_builds() -> None:
    cards = reference_cards()
    built = json.loads(cards_text(cards))
    shipped = json.loads(PACKAGED.read_text())
    assert sorted(built) == sorted(shipped)
    for name, card in built.items():
        card.pop("described_with"), shipped[name].pop("described_with")
        assert card == shipped[name], name
    assert card_to_dict(cards["LM (batch size 20)"])["layers"]["recurrent"] == 1
