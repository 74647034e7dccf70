"""The reference models: the pair table's job types and a few newer ones, built from their
published architectures with random weights (no downloads), plus a synthetic batch for each.

Used to describe the table's job types (model cards) and to measure real co-located training on a
GPU (``scripts/gpu-check``). Torch and torchvision are imported when a model is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The word-level LSTM of PyTorch's word_language_model example on WikiText-2, as Gavel ran it.
LM_VOCAB = 33278
LM_WIDTH = 200
LM_LAYERS = 2
LM_BPTT = 35


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference training job: its job type's name, model family, batch and sample shape."""

    job_type: str
    family: str
    batch: int
    input_shape: tuple[int, ...]  # one sample's shape; token models: (sequence length,)
    classes: int
    build: Callable[[], Any]  # -> torch.nn.Module

    @property
    def tokens(self) -> bool:
        return self.family == "lstm-lm"


def _cifar_resnet18() -> Any:
    """ResNet-18 for 32x32 inputs (3x3 stem, no max-pool), the CIFAR-10 variant Gavel trained."""
    import torch.nn as nn
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def _torchvision(name: str, classes: int) -> Callable[[], Any]:
    def build() -> Any:
        import torchvision.models as tvm

        return tvm.get_model(name, weights=None, num_classes=classes)

    return build


def _lstm_lm() -> Any:
    import torch.nn as nn

    class WordLM(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(LM_VOCAB, LM_WIDTH)
            self.drop = nn.Dropout(0.2)
            self.rnn = nn.LSTM(LM_WIDTH, LM_WIDTH, LM_LAYERS, dropout=0.2)
            self.decoder = nn.Linear(LM_WIDTH, LM_VOCAB)

        def forward(self, tokens: Any) -> Any:  # tokens: (batch, bptt)
            out, _ = self.rnn(self.drop(self.embed(tokens.t())))
            return self.decoder(self.drop(out)).transpose(0, 1)

    return WordLM()


def _image(
    job_type: str, family: str, batch: int, size: int, classes: int, build: Callable[[], Any]
) -> Reference:
    return Reference(job_type, family, batch, (3, size, size), classes, build)


REFERENCES: dict[str, Reference] = {
    r.job_type: r
    for r in (
        _image("ResNet-18 (batch size 32)", "resnet", 32, 32, 10, _cifar_resnet18),
        _image("ResNet-50 (batch size 64)", "resnet", 64, 224, 1000, _torchvision("resnet50", 1000)),
        Reference("LM (batch size 20)", "lstm-lm", 20, (LM_BPTT,), LM_VOCAB, _lstm_lm),
        _image(
            "MobileNetV3-Large (batch size 64)",
            "mobilenet",
            64,
            224,
            1000,
            _torchvision("mobilenet_v3_large", 1000),
        ),
        _image("ViT-B/16 (batch size 32)", "vit", 32, 224, 1000, _torchvision("vit_b_16", 1000)),
        _image("VGG-16 (batch size 32)", "vgg", 32, 224, 1000, _torchvision("vgg16", 1000)),
    )
}


def synthetic_batch(ref: Reference, device: Any) -> tuple[Any, Any]:
    """Random inputs and targets of the reference's shape on ``device`` (made once, reused)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    if ref.tokens:
        x = torch.randint(0, ref.classes, (ref.batch, *ref.input_shape), generator=gen)
        y = torch.randint(0, ref.classes, (ref.batch, *ref.input_shape), generator=gen)
    else:
        x = torch.randn((ref.batch, *ref.input_shape), generator=gen)
        y = torch.randint(0, ref.classes, (ref.batch,), generator=gen)
    return x.to(device), y.to(device)


def loss_of(ref: Reference, output: Any, target: Any) -> Any:
    import torch.nn.functional as F

    if ref.tokens:
        return F.cross_entropy(output.reshape(-1, ref.classes), target.reshape(-1))
    return F.cross_entropy(output, target)
