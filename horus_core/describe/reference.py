"""The reference models: the pair table's job types and a few newer ones, built from their
published architectures with random weights (no downloads), plus a synthetic batch for each.

Used to describe the table's job types (model cards, :mod:`horus_core.describe.cards`) and to
measure real co-located training on a GPU (``scripts/gpu-check``). Torch and torchvision are
imported when a model is built. The table's seven families, as Gavel trained them:

- ResNet-18 on CIFAR-10 (32x32, 3x3 stem, no max-pool), batch 16-256; ResNet-50 on ImageNet
  (224x224), batch 16-128;
- Transformer: the base model of "Attention Is All You Need" (6+6 layers, width 512, 8 heads,
  feed-forward 2048) translating Multi30k; here with 8,000-token vocabularies and 32-token
  sentences (Multi30k's vocabularies are of that order, its sentences shorter), batch 16-256;
- LM: PyTorch's word-level LSTM example on WikiText-2 (2 layers of 200, BPTT 35), batch 5-80;
- Recommendation: Recoder's autoencoder on ML-20M (one hidden layer of 200, tanh, Adam); its
  input is the batch's items over a negative-sampled set of users, here a dense 20,000-wide
  vector, batch 512-8192;
- A3C: the A3C-LSTM Atari agent (four 32/32/64/64 convolutions with max-pools on 80x80 frames,
  an LSTM cell of 512, actor and critic heads); one step is one worker's rollout of 20 frames;
- CycleGAN: two ResNet generators (9 blocks) and two 70x70 PatchGAN discriminators, 256x256
  images, batch 1, one step = the generators' and the discriminators' updates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from horus_core.describe._torch import torch, torchvision

# The word-level LSTM of PyTorch's word_language_model example on WikiText-2, as Gavel ran it.
LM_VOCAB = 33278
LM_WIDTH = 200
LM_LAYERS = 2
LM_BPTT = 35
MT_VOCAB = 8000
MT_LEN = 32
REC_ITEMS = 20000
A3C_STEPS = 20
A3C_ACTIONS = 6

# The job types scripts/gpu-check measures pairs of (all 21 pairs fit its time budget).
GPU_CHECK = (
    "ResNet-18 (batch size 32)",
    "ResNet-50 (batch size 64)",
    "LM (batch size 20)",
    "MobileNetV3-Large (batch size 64)",
    "ViT-B/16 (batch size 32)",
    "VGG-16 (batch size 32)",
)


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference training job: its job type's name, model family, batch and sample shape."""

    job_type: str
    family: str
    batch: int
    input_shape: tuple[int, ...]  # one sample's shape; token models: (sequence length,)
    classes: int
    build: Callable[[], Any]  # -> torch.nn.Module
    kind: str = "image"  # image | tokens | seq2seq | reconstruct | agent | gan: input and loss
    optimizer: str = "sgd-momentum"  # as the reference trained (the card's optimizer state)

    @property
    def tokens(self) -> bool:
        return self.kind in ("tokens", "seq2seq")


def _cifar_resnet18() -> Any:
    """ResNet-18 for 32x32 inputs (3x3 stem, no max-pool), the CIFAR-10 variant Gavel trained."""
    nn: Any = torch().nn
    model = torchvision().models.resnet18(weights=None, num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def torchvision_builder(name: str, classes: int) -> Callable[[], Any]:
    def build() -> Any:
        return torchvision().models.get_model(name, weights=None, num_classes=classes)

    return build


def _lstm_lm() -> Any:
    nn: Any = torch().nn

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


def _translation() -> Any:
    nn: Any = torch().nn

    class Translator(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.src = nn.Embedding(MT_VOCAB, 512)
            self.trg = nn.Embedding(MT_VOCAB, 512)
            self.core = nn.Transformer(512, 8, 6, 6, 2048, dropout=0.1, batch_first=True)
            self.project = nn.Linear(512, MT_VOCAB, bias=False)

        def forward(self, pair: Any) -> Any:  # pair: (batch, 2, length): source, shifted target
            length = pair.shape[-1]
            mask = self.core.generate_square_subsequent_mask(length, device=pair.device)
            out = self.core(self.src(pair[:, 0]), self.trg(pair[:, 1]), tgt_mask=mask, tgt_is_causal=True)
            return self.project(out)

    return Translator()


def _recoder() -> Any:
    nn: Any = torch().nn
    return nn.Sequential(nn.Linear(REC_ITEMS, 200), nn.Tanh(), nn.Dropout(0.5), nn.Linear(200, REC_ITEMS))


def _a3c() -> Any:
    nn: Any = torch().nn

    class A3CLstm(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            layers: list[Any] = []
            for cin, cout, k, pad in ((1, 32, 5, 2), (32, 32, 5, 1), (32, 64, 4, 1), (64, 64, 3, 1)):
                layers += [nn.Conv2d(cin, cout, k, 1, pad), nn.MaxPool2d(2, 2), nn.LeakyReLU(0.1)]
            self.features = nn.Sequential(*layers)
            self.lstm = nn.LSTM(1024, 512)
            self.critic = nn.Linear(512, 1)
            self.actor = nn.Linear(512, A3C_ACTIONS)

        def forward(self, frames: Any) -> Any:  # frames: (steps, 1, 80, 80), one rollout
            x = self.features(frames).flatten(1).unsqueeze(1)
            out, _ = self.lstm(x)
            out = out.squeeze(1)
            return torch().cat([self.actor(out), self.critic(out)], dim=1)

    return A3CLstm()


def _cyclegan() -> Any:
    nn: Any = torch().nn

    def block(ch: int) -> Any:
        return nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch),
        )  # fmt: skip

    class Residual(nn.Module):  # type: ignore[misc]
        def __init__(self, ch: int) -> None:
            super().__init__()
            self.body = block(ch)

        def forward(self, x: Any) -> Any:
            return x + self.body(x)

    def generator() -> Any:
        layers: list[Any] = [nn.ReflectionPad2d(3), nn.Conv2d(3, 64, 7), nn.InstanceNorm2d(64), nn.ReLU(True)]
        for cin in (64, 128):
            layers += [nn.Conv2d(cin, 2 * cin, 3, 2, 1), nn.InstanceNorm2d(2 * cin), nn.ReLU(True)]
        layers += [Residual(256) for _ in range(9)]
        for cin in (256, 128):
            layers += [nn.ConvTranspose2d(cin, cin // 2, 3, 2, 1, output_padding=1)]
            layers += [nn.InstanceNorm2d(cin // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(64, 3, 7), nn.Tanh()]
        return nn.Sequential(*layers)

    def discriminator() -> Any:
        layers: list[Any] = [nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2, True)]
        for cin, stride in ((64, 2), (128, 2), (256, 1)):
            layers += [
                nn.Conv2d(cin, 2 * cin, 4, stride, 1),
                nn.InstanceNorm2d(2 * cin),
                nn.LeakyReLU(0.2, True),
            ]
        layers += [nn.Conv2d(512, 1, 4, 1, 1)]
        return nn.Sequential(*layers)

    class CycleGAN(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.g_ab, self.g_ba = generator(), generator()
            self.d_a, self.d_b = discriminator(), discriminator()

        def forward(self, images: Any) -> Any:  # images: (batch, 2, 3, 256, 256): one of each domain
            a, b = images[:, 0], images[:, 1]
            fake_b, fake_a = self.g_ab(a), self.g_ba(b)
            rec_a, rec_b = self.g_ba(fake_b), self.g_ab(fake_a)
            same_b, same_a = self.g_ab(b), self.g_ba(a)  # identity terms
            adversarial = self.d_b(fake_b).mean() + self.d_a(fake_a).mean()
            cycle = (rec_a - a).abs().mean() + (rec_b - b).abs().mean()
            identity = (same_b - b).abs().mean() + (same_a - a).abs().mean()
            real = self.d_b(b).mean() + self.d_a(a).mean()
            fake = self.d_b(fake_b.detach()).mean() + self.d_a(fake_a.detach()).mean()
            return torch().stack([adversarial + 10.0 * cycle + 5.0 * identity, real - fake])

    return CycleGAN()


def image_reference(
    job_type: str, family: str, batch: int, size: int, classes: int, build: Callable[[], Any]
) -> Reference:
    return Reference(job_type, family, batch, (3, size, size), classes, build)


def _table_references() -> list[Reference]:
    out = [
        image_reference(f"ResNet-18 (batch size {b})", "resnet", b, 32, 10, _cifar_resnet18)
        for b in (16, 32, 64, 128, 256)
    ]
    out += [
        image_reference(
            f"ResNet-50 (batch size {b})", "resnet", b, 224, 1000, torchvision_builder("resnet50", 1000)
        )
        for b in (16, 32, 64, 128)
    ]
    out += [
        Reference(f"Transformer (batch size {b})", "transformer", b, (2, MT_LEN), MT_VOCAB, _translation,
                  "seq2seq", "adam")
        for b in (16, 32, 64, 128, 256)
    ]  # fmt: skip
    out.append(Reference("A3C", "a3c", A3C_STEPS, (1, 80, 80), A3C_ACTIONS, _a3c, "agent", "adam"))
    out += [
        Reference(f"LM (batch size {b})", "lstm-lm", b, (LM_BPTT,), LM_VOCAB, _lstm_lm, "tokens", "sgd")
        for b in (5, 10, 20, 40, 80)
    ]
    out += [
        Reference(f"Recommendation (batch size {b})", "recommendation", b, (REC_ITEMS,), REC_ITEMS, _recoder,
                  "reconstruct", "adam")
        for b in (512, 1024, 2048, 4096, 8192)
    ]  # fmt: skip
    out.append(Reference("CycleGAN", "cyclegan", 1, (2, 3, 256, 256), 1, _cyclegan, "gan", "adam"))
    return out


REFERENCES: dict[str, Reference] = {
    r.job_type: r
    for r in (
        *_table_references(),
        image_reference(
            "MobileNetV3-Large (batch size 64)",
            "mobilenet",
            64,
            224,
            1000,
            torchvision_builder("mobilenet_v3_large", 1000),
        ),
        image_reference(
            "ViT-B/16 (batch size 32)", "vit", 32, 224, 1000, torchvision_builder("vit_b_16", 1000)
        ),
        image_reference("VGG-16 (batch size 32)", "vgg", 32, 224, 1000, torchvision_builder("vgg16", 1000)),
    )
}


def synthetic_batch(ref: Reference, device: Any) -> tuple[Any, Any]:
    """Random inputs and targets of the reference's shape on ``device`` (made once, reused)."""
    t = torch()
    gen = t.Generator().manual_seed(0)
    shape = (ref.batch, *ref.input_shape)
    if ref.kind == "agent":  # a rollout: the frames are the batch
        shape = (ref.batch, *ref.input_shape)
    if ref.tokens:
        x = t.randint(0, ref.classes, shape, generator=gen)
        y = t.randint(0, ref.classes, (ref.batch, ref.input_shape[-1]), generator=gen)
    elif ref.kind == "reconstruct":
        x = (t.rand(shape, generator=gen) < 0.01).float()
        y = x
    else:
        x = t.randn(shape, generator=gen)
        y = t.randint(0, ref.classes, (ref.batch,), generator=gen)
    return x.to(device), y.to(device)


def loss_of(ref: Reference, output: Any, target: Any) -> Any:
    F = torch().nn.functional
    if ref.tokens:
        return F.cross_entropy(output.reshape(-1, ref.classes), target.reshape(-1))
    if ref.kind == "reconstruct":
        return F.binary_cross_entropy_with_logits(output, target)
    if ref.kind == "agent":
        return output[:, -1].pow(2).mean() - F.log_softmax(output[:, :-1], dim=1)[:, 0].mean()
    if ref.kind == "gan":
        return output.sum()
    return F.cross_entropy(output, target)
