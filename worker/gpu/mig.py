"""MIG instances as the worker reports them: each instance of a MIG-enabled GPU is a device of its
own, with its UUID, its memory and its share of the GPU's compute (docs/sharing.md). NVML calls
only (run on the probe's NVML thread); the worker reads the configuration, never changes it."""

from __future__ import annotations

import re
from typing import Any

from worker.gpu.base import GpuInfo

MIG_ENABLED = 1  # NVML_DEVICE_MIG_ENABLE
ERR_NOT_FOUND = 6  # an empty instance slot
_MIB = 1 << 20
_SLICES = re.compile(r"(\d+)g\.")


def mig_enabled(nvml: Any, handle: Any) -> bool:
    """Whether MIG is enabled (now, not only pending) on a GPU; False where NVML has no MIG."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except (nvml.NVMLError, AttributeError):
        return False
    return int(current) == MIG_ENABLED


def mig_instances(nvml: Any, parent: Any, info: GpuInfo) -> list[tuple[Any, GpuInfo]]:
    """(handle, info) of each MIG instance of the GPU ``parent`` (``info``: its own): a model
    named after its profile ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", typed h100-3g.40gb), its
    memory, its share of the GPU's compute slices, the GPU's UUID. Index 0: the caller numbers."""
    out: list[tuple[Any, GpuInfo]] = []
    for i in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(parent))):
        try:
            handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
        except nvml.NVMLError as err:
            if getattr(err, "value", None) == ERR_NOT_FOUND:
                continue
            raise
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB
        name = _text(nvml.nvmlDeviceGetName(handle))
        slices = _slices(nvml, handle, name)
        if "mig" not in name.lower():
            name = f"{info.model} MIG {slices}g.{round(total / 1024)}gb"
        fraction = min(1.0, slices / compute_slices(info.model))
        out.append((handle, GpuInfo(uuid, 0, name, total, compute_fraction=fraction, parent_uuid=info.uuid)))
    return out


def compute_slices(model: str) -> int:
    """A MIG-capable GPU's compute slices: 4 on an A30, 7 on the A100, H100 and H200."""
    return 4 if "a30" in model.lower() else 7


def _slices(nvml: Any, handle: Any, name: str) -> int:
    """An instance's compute slices: NVML's attributes, else the "3g" of its profile name."""
    try:
        return max(1, int(nvml.nvmlDeviceGetAttributes(handle).gpuInstanceSliceCount))
    except (nvml.NVMLError, AttributeError):
        match = _SLICES.search(name)
        return int(match.group(1)) if match else 1


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
