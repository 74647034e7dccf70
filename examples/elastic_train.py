"""An elastic training job for Horus: numpy only, no GPU needed.

Run it with a GPU range, e.g. ``hctl submit --gpus 2:8 --total-steps 400 -- python
examples/elastic_train.py --checkpoint-dir /tmp/ckpt --steps 400``. At every start it reads its
GPU count from ``$HORUS_GPUS`` (or ``$WORLD_SIZE``), resumes from its checkpoint ("resumed from
step N"), and trains a small linear model by minibatch SGD on synthetic data, splitting each
global batch over its GPUs (one step takes ``--step-s / GPUs`` seconds, a stand-in for data
parallelism). Every step it reports (step, loss, samples/s) through ``horus_core.progress``;
it checkpoints every ``--checkpoint-every`` steps and when stopped (SIGTERM: a preemption or an
Optimus resize), then exits. ``runs.log`` in the checkpoint directory records each run's start
and end (attempt, GPUs, step, time), so one can check that no two runs overlapped.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import sys
import time
from types import FrameType

import numpy as np

try:
    from horus_core.progress import report
except ImportError:  # outside Horus's environment: train without reporting

    def report(step: int, loss: float | None = None, samples_per_s: float | None = None) -> None:
        return None


FEATURES = 16
BATCH = 64
CHECKPOINT = "checkpoint.npz"


def gpu_count() -> int:
    """The GPUs this run was given: ``$HORUS_GPUS``, else ``$WORLD_SIZE``, else 1."""
    for key in ("HORUS_GPUS", "WORLD_SIZE"):
        value = os.environ.get(key, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint-dir", type=pathlib.Path, required=True)
    p.add_argument("--steps", type=int, default=1000, help="train until this step")
    p.add_argument("--step-s", type=float, default=0.2, help="seconds per step on one GPU")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


class Trainer:
    """The model (weights), the data it learns (a fixed seeded teacher plus noise), its step."""

    def __init__(self, seed: int, lr: float) -> None:
        rng = np.random.default_rng(seed)
        self.teacher = rng.normal(size=FEATURES)
        self.weights = np.zeros(FEATURES)
        self.step = 0
        self.lr = lr
        self.seed = seed

    def train_step(self) -> float:
        """One SGD step on a fresh seeded batch (the same batch for a step after a resume)."""
        rng = np.random.default_rng((self.seed, self.step))
        x = rng.normal(size=(BATCH, FEATURES))
        y = x @ self.teacher + 0.1 * rng.normal(size=BATCH)
        err = x @ self.weights - y
        lr = self.lr / (1.0 + self.step / 200.0)
        self.weights -= lr * (x.T @ err) / BATCH
        self.step += 1
        return float(np.mean(err * err))

    def save(self, folder: pathlib.Path) -> None:
        tmp = folder / (CHECKPOINT + ".tmp.npz")
        np.savez(tmp, weights=self.weights, step=np.array(self.step))
        os.replace(tmp, folder / CHECKPOINT)  # a crash mid-save keeps the previous checkpoint

    def load(self, folder: pathlib.Path) -> bool:
        path = folder / CHECKPOINT
        if not path.exists():
            return False
        with np.load(path) as data:
            self.weights = data["weights"].copy()
            self.step = int(data["step"])
        return True


def note(folder: pathlib.Path, what: str, gpus: int, step: int) -> None:
    attempt = os.environ.get("HORUS_ATTEMPT", "0")
    with open(folder / "runs.log", "a", encoding="ascii") as fh:
        fh.write(f"{what} attempt={attempt} gpus={gpus} step={step} at={time.time():.6f}\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder: pathlib.Path = args.checkpoint_dir
    folder.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count()
    trainer = Trainer(args.seed, args.lr)
    resumed = trainer.load(folder)
    print(f"world size {gpus}", flush=True)
    print(f"resumed from step {trainer.step}" if resumed else "starting at step 0", flush=True)
    note(folder, "start", gpus, trainer.step)
    stopping = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    step_s = args.step_s / gpus
    while trainer.step < args.steps and not stopping:
        began = time.monotonic()
        loss = trainer.train_step()
        time.sleep(max(0.0, step_s - (time.monotonic() - began)))
        report(trainer.step, loss=loss, samples_per_s=BATCH / max(time.monotonic() - began, 1e-9))
        if trainer.step % args.checkpoint_every == 0:
            trainer.save(folder)
    trainer.save(folder)
    note(folder, "stop" if stopping else "done", gpus, trainer.step)
    print(f"{'stopped' if stopping else 'finished'} at step {trainer.step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
