"""A stand-in training loop for demos and tests (standard library only).

    python -m horus_core.workload --job-type "ResNet-18 (batch size 32)" --steps 300 --steps-per-s 20

Each step sleeps ``1 / (steps_per_s x speed)`` where the speed comes from ``$HORUS_SPEED_FILE``
(1.0 alone on a GPU; a simulated worker lowers it when the job shares a GPU with a bad partner),
so co-location really costs time. It prints a line every ``--log-every`` steps, reports progress
(step, a synthetic decreasing loss, samples/s) through :mod:`horus_core.progress`, fails on purpose
with ``--fail-at`` and exits 143 after printing a line when it receives SIGTERM.

On a simulated GPU it also uses GPU memory (docs/sharing.md): ``--gpu-memory-mib N`` at the start,
growing evenly to ``--grow-to-mib M`` by its last step, written to ``$HORUS_SIM_GPU_MEMORY_FILE``
(which the simulated probe reads as its use). Like CUDA under MPS or HAMi-core, it refuses to grow
past the limit those set (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``, ``CUDA_DEVICE_MEMORY_LIMIT_0``): it
prints PyTorch's out-of-memory error and exits 1. It prints the unix time when it first uses more
than ``$HORUS_GPU_MEMORY_CAP_MIB`` (``over cap at``).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from types import FrameType

from horus_core import progress
from horus_core.simgpu import GpuMemory

_BATCH = re.compile(r"batch size (\d+)")
SPEED_REFRESH_S = 0.2


class _State:
    step = 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m horus_core.workload", description=__doc__.splitlines()[0])
    p.add_argument("--job-type", default="ResNet-18 (batch size 32)", help="workload signature (for the log)")
    p.add_argument("--steps", type=int, default=300, help="steps to run (default 300)")
    p.add_argument("--steps-per-s", type=float, default=20.0, help="solo speed in steps/s (default 20)")
    p.add_argument("--log-every", type=int, default=10, help="print a line every N steps (default 10)")
    p.add_argument("--fail-at", type=int, default=None, metavar="STEP", help="fail on purpose at this step")
    p.add_argument(
        "--exit-code",
        type=int,
        default=None,
        metavar="N",
        help="exit status at the end, or at --fail-at (default 0, or 1 when failing)",
    )
    p.add_argument(
        "--gpu-memory-mib", type=int, default=0, help="GPU memory used at the start (simulated GPUs)"
    )
    p.add_argument(
        "--grow-to-mib", type=int, default=None, help="GPU memory used by the last step (default: no growth)"
    )
    args = p.parse_args(argv)
    if args.steps < 0 or args.steps_per_s <= 0 or args.log_every < 1:
        p.error("--steps must be >= 0, --steps-per-s > 0 and --log-every >= 1")
    if args.gpu_memory_mib < 0 or (args.grow_to_mib is not None and args.grow_to_mib < 0):
        p.error("--gpu-memory-mib and --grow-to-mib must not be negative")
    return args


def loss_at(step: int) -> float:
    """A loss curve of the shape Optimus fits: 1 / (b0 * k + b1) + b2."""
    return 1.0 / (0.02 * step + 0.4) + 0.1


def batch_size(job_type: str) -> int:
    match = _BATCH.search(job_type)
    return int(match.group(1)) if match else 32


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    print(f"received SIGTERM at step {_State.step} at {time.time():.3f}, exiting", flush=True)
    sys.exit(143)


def run(args: argparse.Namespace) -> int:
    batch = batch_size(args.job_type)
    print(f"workload {args.job_type!r}: {args.steps} steps at {args.steps_per_s:g} steps/s solo", flush=True)
    start = last_read = time.monotonic()
    speed = progress.speed()
    deadline = start
    grow_to = args.gpu_memory_mib if args.grow_to_mib is None else args.grow_to_mib
    memory = GpuMemory.from_env(os.environ) if args.gpu_memory_mib or grow_to else None
    for step in range(1, args.steps + 1):
        _State.step = step
        if memory is not None and not memory.use(_memory_at(args.gpu_memory_mib, grow_to, step, args.steps)):
            return 1  # (out of memory: CUDA's error printed)
        now = time.monotonic()
        if now - last_read >= SPEED_REFRESH_S:
            speed, last_read = progress.speed(), now
        deadline = max(deadline, now - 1.0) + 1.0 / (args.steps_per_s * speed)
        time.sleep(max(0.0, deadline - time.monotonic()))
        if args.fail_at is not None and step >= args.fail_at:
            print(f"error: simulated failure at step {step}", file=sys.stderr, flush=True)
            return 1 if args.exit_code is None else args.exit_code
        if step % args.log_every == 0 or step == args.steps:
            rate = args.steps_per_s * speed
            loss = loss_at(step)
            progress.report(step, loss=loss, samples_per_s=rate * batch)
            print(
                f"step {step}/{args.steps} loss {loss:.4f} speed {speed:.2f} ({rate:.1f} steps/s)", flush=True
            )
    print(f"done: {args.steps} steps in {time.monotonic() - start:.1f} s", flush=True)
    return 0 if args.exit_code is None else args.exit_code


def _memory_at(first: int, last: int, step: int, steps: int) -> int:
    """The GPU memory used at ``step`` of ``steps``: ``first`` growing evenly to ``last``."""
    return first + round((last - first) * step / max(1, steps))


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
