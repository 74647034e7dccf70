"""Kubernetes resource quantities (``500m``, ``2``, ``1Gi``, ``512M``, ``1e3``) as numbers."""

from __future__ import annotations

import math
import re

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


def parse_quantity(value: object) -> float:
    """A quantity as a float (``500m`` -> 0.5, ``1Gi`` -> 1073741824.0); ValueError if it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _QUANTITY.match(str(value).strip())
        if match is None:
            raise ValueError(f"not a quantity: {str(value)[:40]!r} (e.g. 2, 500m, 1Gi)")
        number = float(match.group(1)) * _SUFFIX[match.group(2) or ""]
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"not a non-negative quantity: {str(value)[:40]!r}")
    return number


def parse_count(value: object) -> int:
    """A whole count (``nvidia.com/gpu: 2``); ValueError for a fraction or a negative."""
    number = parse_quantity(value)
    if number != int(number):
        raise ValueError(f"not a whole number: {str(value)[:40]!r}")
    return int(number)
