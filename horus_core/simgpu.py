"""The GPU memory of a stand-in workload on a simulated GPU (standard library only: jobs import it).

The workload tells the simulated probe what it uses through ``$HORUS_SIM_GPU_MEMORY_FILE`` and,
like CUDA under NVIDIA MPS or HAMi-core, is refused memory beyond the limit those set for it: the
first device's ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=4096M``) or ``CUDA_DEVICE_MEMORY_LIMIT_0``
(``4096m``), or ``CUDA_DEVICE_MEMORY_LIMIT``. docs/sharing.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

MEMORY_ENV = "HORUS_SIM_GPU_MEMORY_FILE"
CAP_ENV = "HORUS_GPU_MEMORY_CAP_MIB"
_UNITS = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.IGNORECASE)


def parse_limit(text: str) -> int | None:
    """A CUDA-style size (``4096M``, ``4g``, ``1073741824``) in MiB; None if unreadable."""
    match = _SIZE.match(text)
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def limit_of(env: Mapping[str, str]) -> int | None:
    """The memory limit (MiB) MPS or HAMi-core would hold the job's first device to; None: none."""
    mps = env.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "")
    for part in mps.split(","):
        device, _, size = part.partition("=")
        if device.strip() == "0":
            return parse_limit(size)
    for name in ("CUDA_DEVICE_MEMORY_LIMIT_0", "CUDA_DEVICE_MEMORY_LIMIT"):
        if env.get(name):
            return parse_limit(env[name])
    return None


@dataclass
class GpuMemory:
    """What the workload uses now; :meth:`use` grows it (False: refused, the error printed)."""

    path: str
    limit_mib: int | None
    cap_mib: int
    used_mib: int = -1
    over_cap_at: float | None = None

    @staticmethod
    def from_env(env: Mapping[str, str]) -> GpuMemory:
        cap = env.get(CAP_ENV, "")
        return GpuMemory(env.get(MEMORY_ENV, ""), limit_of(env), int(cap) if cap.isdigit() else 0)

    def use(self, mib: int) -> bool:
        if mib == self.used_mib:
            return True
        if self.limit_mib is not None and mib > self.limit_mib:
            print(
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {mib - self.used_mib} MiB "
                f"(GPU 0; {self.used_mib} MiB in use, limit {self.limit_mib} MiB)",
                file=sys.stderr,
                flush=True,
            )
            return False
        self.used_mib = mib
        if self.cap_mib and mib > self.cap_mib and self.over_cap_at is None:
            self.over_cap_at = time.time()
            print(f"gpu memory {mib} MiB over cap {self.cap_mib} MiB at {self.over_cap_at:.3f}", flush=True)
        if self.path:
            tmp = f"{self.path}.tmp"
            with contextlib.suppress(OSError):  # (nowhere to say it: the probe uses the profile)
                with open(tmp, "w", encoding="ascii") as fh:
                    fh.write(f"{mib}\n")
                os.replace(tmp, self.path)
        return True
