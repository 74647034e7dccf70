"""A GPU load that needs only the NVIDIA driver: no CUDA toolkit, no PyTorch.

Holds a CUDA context on the first GPU that CUDA_VISIBLE_DEVICES shows, allocates ``--mib`` of
device memory, and with ``--busy`` keeps the SMs busy with a PTX kernel the driver JIT-compiles,
for ``--seconds``. Prints one JSON line at the end (kernels run, kernels/s), so two copies on one
GPU measure a co-location slowdown: ``kernels_per_s(solo) / kernels_per_s(co-located)``.

    CUDA_VISIBLE_DEVICES=GPU-... python tests/gpu/cuda_load.py --mib 1024 --seconds 30 --busy

Run on an H200 on 2026-11-27 through scripts/gpu-check (see docs/gpu-validation.md).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time

# A linear congruential loop per thread, stored at the end so the JIT cannot drop it.
_PTX = """
.version {version}
.target {target}
.address_size 64

.visible .entry spin(.param .u64 out, .param .u32 iters)
{{
    .reg .pred %p;
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iters];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, 0;
LOOP:
    mad.lo.u32 %r2, %r2, 1664525, 1013904223;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p, %r3, %r1;
    @%p bra LOOP;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r7, %tid.x;
    mad.lo.u32 %r6, %r4, %r5, %r7;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}}
"""
_TARGETS = [("7.0", "sm_70"), ("7.8", "sm_90"), ("8.0", "sm_90"), ("6.0", "sm_50")]
GRID, BLOCK = 1024, 256


class Cuda:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, name: str, *args: object) -> None:
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(text))
            raise RuntimeError(f"{name} failed: {(text.value or b'?').decode()} ({result})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--busy", action="store_true", help="keep the SMs busy (else only hold memory)")
    parser.add_argument("--iters", type=int, default=1 << 18, help="loop length per thread per kernel")
    args = parser.parse_args()

    cuda = Cuda()
    cuda.check("cuInit", 0)
    device, context = ctypes.c_int(), ctypes.c_void_p()
    cuda.check("cuDeviceGet", ctypes.byref(device), 0)
    cuda.check("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
    cuda.check("cuCtxSetCurrent", context)
    hold = ctypes.c_uint64()
    cuda.check("cuMemAlloc_v2", ctypes.byref(hold), ctypes.c_size_t(args.mib << 20))
    cuda.check("cuMemsetD8_v2", hold, ctypes.c_ubyte(1), ctypes.c_size_t(args.mib << 20))
    kernels, start = 0, time.monotonic()
    if args.busy:
        func = _load_kernel(cuda)
        out = ctypes.c_uint64()
        cuda.check("cuMemAlloc_v2", ctypes.byref(out), ctypes.c_size_t(GRID * BLOCK * 4))
        iters = ctypes.c_uint32(args.iters)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(out), ctypes.addressof(iters))
        while time.monotonic() - start < args.seconds:
            cuda.check("cuLaunchKernel", func, GRID, 1, 1, BLOCK, 1, 1, 0, None, params, None)
            cuda.check("cuCtxSynchronize")
            kernels += 1
    else:
        time.sleep(args.seconds)
    elapsed = time.monotonic() - start
    print(
        json.dumps(
            {
                "kernels": kernels,
                "seconds": round(elapsed, 3),
                "kernels_per_s": round(kernels / elapsed, 3),
                "mib": args.mib,
            }
        ),
        flush=True,
    )
    return 0


def _load_kernel(cuda: Cuda) -> ctypes.c_void_p:
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    errors = []
    for version, target in _TARGETS:
        image = _PTX.format(version=version, target=target).encode() + b"\0"
        try:
            cuda.check("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(image))
            break
        except RuntimeError as err:
            errors.append(f"{target}: {err}")
    else:
        raise RuntimeError("the driver JIT took no PTX variant: " + "; ".join(errors))
    cuda.check("cuModuleGetFunction", ctypes.byref(func), module, b"spin")
    return func


if __name__ == "__main__":
    sys.exit(main())
