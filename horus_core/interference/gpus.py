"""GPU models by family key: memory as NVML reports it, peak FLOP/s and memory bandwidth.

Figures from the vendors' datasheets (dense, without sparsity; boost clocks): FP32 on the CUDA
cores, and FP16/BF16 on the tensor cores (the K80 has none: its FP32 rate). A K80 is one of the
board's two GK210 GPUs (the unit a job gets); the P100 is the 16 GB PCIe card and the V100 the
16 GB SXM2 one (the clouds Gavel measured its table on); A100 the 40 GB SXM4, H100 the SXM5.
Memory is what NVML's ``memory.total`` reads, a little below the marketed size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuSpec:
    memory_mib: int
    fp32_tflops: float
    tensor_tflops: float  # FP16/BF16 dense
    bandwidth_gbs: float  # memory bandwidth, GB/s

    def peak_flops(self, half: bool) -> float:
        """Peak FLOP/s for float32 training, or for half-precision / AMP training."""
        return 1e12 * (self.tensor_tflops if half else self.fp32_tflops)

    @property
    def bandwidth(self) -> float:
        return 1e9 * self.bandwidth_gbs


GPUS: Mapping[str, GpuSpec] = {
    "k80": GpuSpec(11441, 4.37, 4.37, 240),
    "p100": GpuSpec(16280, 9.3, 18.7, 732),
    "v100": GpuSpec(16160, 15.7, 125.0, 900),
    "t4": GpuSpec(15360, 8.1, 65.0, 320),
    "a10": GpuSpec(23028, 31.2, 125.0, 600),
    "a10g": GpuSpec(23028, 31.2, 125.0, 600),
    "l4": GpuSpec(23034, 30.3, 121.0, 300),
    "a100": GpuSpec(40960, 19.5, 312.0, 1555),
    "l40s": GpuSpec(46068, 91.6, 362.0, 864),
    "h100": GpuSpec(81559, 66.9, 989.0, 3350),
    "h200": GpuSpec(143771, 66.9, 989.0, 4800),
}

# The GPU the packaged pair table's utilisations were fitted on (derive.py): the predictor's
# utilisations, sensitivities and intensities are on its scale, as the table profiles are.
REFERENCE_GPU = "v100"


def gpu_spec(gpu_type: str) -> GpuSpec | None:
    return GPUS.get(gpu_type)
