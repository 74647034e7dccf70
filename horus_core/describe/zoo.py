"""The model zoo of ``scripts/gpu-check --zoo``: torchvision's image classifiers, random weights,
at two batch sizes, as references (:class:`~horus_core.describe.reference.Reference`) a trainer
can build and a card can describe.

49 models of 14 families (a family is what leave-one-family-out holds out together: resnet holds
the ResNeXt and wide variants, mobilenet holds MobileNetV2 and V3). Families are the
architectures' own lineages, not a fit to any measurement. Models whose training output is not a
plain tensor (GoogLeNet and Inception v3 return auxiliary heads) are left out.
"""

from __future__ import annotations

from horus_core.describe.reference import Reference, image_reference, torchvision_builder

ZOO_MODELS: tuple[tuple[str, str], ...] = (
    *(
        (m, "resnet")
        for m in (
            "resnet18",
            "resnet34",
            "resnet50",
            "resnet101",
            "resnet152",
            "resnext50_32x4d",
            "resnext101_32x8d",
            "wide_resnet50_2",
        )
    ),
    *((m, "vgg") for m in ("vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg16_bn")),
    *((m, "densenet") for m in ("densenet121", "densenet161", "densenet169", "densenet201")),
    *((m, "mobilenet") for m in ("mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large")),
    *((m, "mnasnet") for m in ("mnasnet0_5", "mnasnet1_0")),
    *(
        (m, "efficientnet")
        for m in (
            "efficientnet_b0",
            "efficientnet_b1",
            "efficientnet_b2",
            "efficientnet_b3",
            "efficientnet_v2_s",
        )
    ),
    *(
        (m, "regnet")
        for m in (
            "regnet_x_400mf",
            "regnet_x_800mf",
            "regnet_x_1_6gf",
            "regnet_y_400mf",
            "regnet_y_800mf",
            "regnet_y_1_6gf",
        )
    ),
    *(
        (m, "shufflenet")
        for m in ("shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0")
    ),
    *((m, "squeezenet") for m in ("squeezenet1_0", "squeezenet1_1")),
    *((m, "convnext") for m in ("convnext_tiny", "convnext_small")),
    *((m, "vit") for m in ("vit_b_16", "vit_b_32")),
    *((m, "swin") for m in ("swin_t", "swin_s", "swin_v2_t")),
    ("alexnet", "alexnet"),
    ("maxvit_t", "maxvit"),
)
ZOO_BATCHES = (16, 64)
IMAGE_SIZE = 224
CLASSES = 1000


def zoo_job_type(model: str, batch: int) -> str:
    return f"torchvision:{model} (batch size {batch})"


def zoo_references(
    models: tuple[str, ...] = (), batches: tuple[int, ...] = ZOO_BATCHES, size: int = IMAGE_SIZE
) -> list[Reference]:
    """The zoo's references, model by model (``models``: a subset by torchvision name, in the
    zoo's order); ValueError naming a model the zoo does not hold."""
    known = dict(ZOO_MODELS)
    unknown = [m for m in models if m not in known]
    if unknown:
        raise ValueError(
            f"not in the zoo: {', '.join(unknown)} (horus_core/describe/zoo.py lists {len(known)})"
        )
    chosen = [m for m, _ in ZOO_MODELS if not models or m in models]
    return [
        image_reference(zoo_job_type(m, b), known[m], b, size, CLASSES, torchvision_builder(m, CLASSES))
        for m in chosen
        for b in batches
    ]


ZOO: dict[str, Reference] = {r.job_type: r for r in zoo_references()}
