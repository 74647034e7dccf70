"""Describe a PyTorch model without a GPU (model cards); needs the ``describe`` extra (torch).

Nothing outside this package imports torch, and the master never imports this package (an import
contract holds it). Torch is imported when a model is described, not when this package is.
"""

from horus_core.describe._torch import MissingTorch
from horus_core.describe.count import DescribeError, describe
from horus_core.describe.models import describe_named, parse_shape

__all__ = ["DescribeError", "MissingTorch", "describe", "describe_named", "parse_shape"]
