"""A stand-in training loop for demos and tests (standard library only).

    python -m horus_core.workload --job-type "ResNet-18 (batch size 32)" --steps 300 --steps-per-s 20

Each step sleeps ``1 / (steps_per_s x speed)`` where the speed comes from ``$HORUS_SPEED_FILE``
(1.0 alone on a GPU; a simulated worker lowers it when the job shares a GPU with a bad partner),
so co-location really costs time. It prints a line every ``--log-every`` steps, reports progress
(step, a synthetic decreasing loss, samples/s) through :mod:`horus_core.progress`, fails on purpose
with ``--fail-at`` and exits 143 after printing a line when it receives SIGTERM.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from types import FrameType

from horus_core import progress

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
    args = p.parse_args(argv)
    if args.steps < 0 or args.steps_per_s <= 0 or args.log_every < 1:
        p.error("--steps must be >= 0, --steps-per-s > 0 and --log-every >= 1")
    return args


def loss_at(step: int) -> float:
    """A loss curve of the shape Optimus fits: 1 / (b0 * k + b1) + b2."""
    return 1.0 / (0.02 * step + 0.4) + 0.1


def batch_size(job_type: str) -> int:
    match = _BATCH.search(job_type)
    return int(match.group(1)) if match else 32


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    print(f"received SIGTERM at step {_State.step}, exiting", flush=True)
    sys.exit(143)


def run(args: argparse.Namespace) -> int:
    batch = batch_size(args.job_type)
    print(f"workload {args.job_type!r}: {args.steps} steps at {args.steps_per_s:g} steps/s solo", flush=True)
    start = last_read = time.monotonic()
    speed = progress.speed()
    deadline = start
    for step in range(1, args.steps + 1):
        _State.step = step
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


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
