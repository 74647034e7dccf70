"""A CUDA out-of-memory failure, told by its exit status and its log's last lines (pure, plus one
blocking file read).

The signatures are the messages the common frameworks print when the CUDA allocator refuses
(PyTorch's ``torch.OutOfMemoryError: CUDA out of memory``, CUDA's ``CUDA_ERROR_OUT_OF_MEMORY`` /
``cudaErrorMemoryAllocation`` / ``out of memory`` from the runtime API, cuBLAS' and cuDNN's
allocation failures, TensorFlow's and JAX's ``RESOURCE_EXHAUSTED: Out of memory``). Only the
tail of the log is read: the error that ended the job is at its end.
"""

from __future__ import annotations

import pathlib
import re

TAIL_BYTES = 64 * 1024
_SIGNATURE = re.compile(
    rb"CUDA out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
    rb"|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|RESOURCE_EXHAUSTED: Out of memory"
    rb"|CUDA error: out of memory"
)


def is_oom(exit_code: int | None, log_tail: bytes) -> bool:
    """An exit that is a CUDA out-of-memory failure: non-zero, with a signature in the tail."""
    return exit_code is not None and exit_code != 0 and _SIGNATURE.search(log_tail) is not None


def read_tail(path: pathlib.Path, limit: int = TAIL_BYTES) -> bytes:
    """Blocking: the last ``limit`` bytes of ``path`` (b"" if it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - limit))
            return fh.read(limit)
    except OSError:
        return b""
