"""Importing torch and torchvision for describing models, including a torchvision built for
another torch.

PyPI's torchvision wheels are linked against a CUDA torch. Beside a CPU torch of the same version
its compiled operators do not load, and ``import torchvision`` then fails with
``RuntimeError: operator torchvision::nms does not exist``: its ``_meta_registrations`` registers
fake kernels for ``torchvision::nms`` and ``torchvision::qnms`` whether or not the compiled library
declared them. Describing a model never calls those detection operators, so where the import fails
with exactly that error we declare the two operators' schemas ourselves (the signatures
torchvision's C++ code declares) and import it again: the pure-Python model definitions work.
"""

from __future__ import annotations

import sys
from typing import Any

_MISSING_NMS = "operator torchvision::nms does not exist"
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_declared: list[Any] = []  # the library fragment must stay alive for the declarations to hold


class MissingTorch(ImportError):
    """torch (or torchvision) is not installed: ``pip install 'horus[describe]'``."""


def torch() -> Any:
    try:
        import torch as module
    except ImportError as exc:
        raise MissingTorch(f"describing a model needs torch: pip install 'horus[describe]' ({exc})") from None
    return module


def torchvision() -> Any:
    """``torchvision``, imported (see the module's note on a mismatched build)."""
    torch()
    try:
        import torchvision as module
    except ImportError as exc:
        raise MissingTorch(f"this model needs torchvision: pip install 'horus[describe]' ({exc})") from None
    except RuntimeError as exc:
        if _MISSING_NMS not in str(exc) or _declared:
            raise
        _declare_detection_ops()
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        import torchvision as module
    return module


def _declare_detection_ops() -> None:
    import torch as t

    lib = t.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        lib.define(schema)
    _declared.append(lib)
