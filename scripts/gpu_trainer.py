"""One real training process on one GPU, for ``scripts/gpu-check`` (needs torch and torchvision).

    python scripts/gpu_trainer.py --job-type "ResNet-50 (batch size 64)" --serve
        builds the model (random weights), warms up, prints {"ready": ...}, then answers stdin lines
        "run T0 SECONDS" (train from wall-clock T0 for SECONDS; one JSON line with steps/s) and "quit".
    python scripts/gpu_trainer.py --job-type ... --steps 400 [--grow-to-mib 12288 --grow-mib-per-s 2048]
        trains a fixed number of steps (a batch job), optionally growing its GPU memory as it runs.

Every output line is one JSON object. Synthetic inputs are made once on the GPU, so the figures
measure the GPU and the framework, not a data loader.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from horus_core.describe.reference import REFERENCES, Reference, loss_of, synthetic_batch
from horus_core.describe.zoo import ZOO

KNOWN = REFERENCES | ZOO  # the table's job types, the newer ones and the zoo's (gpu-check --zoo)

_MIB = 1 << 20


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


class Trainer:
    def __init__(self, ref: Reference, device: str) -> None:
        import torch

        self.torch = torch
        self.ref = ref
        self.device = torch.device(device)
        self.model = ref.build().to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x, self.y = synthetic_batch(ref, self.device)

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        loss = loss_of(self.ref, self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def run_window(self, t0: float, seconds: float) -> dict[str, Any]:
        while time.time() < t0:
            time.sleep(min(0.001, max(0.0, t0 - time.time())))
        start = time.perf_counter()
        steps, last = 0, start
        while last - start < seconds:
            self.step()
            steps += 1
            last = time.perf_counter()
        return {"steps": steps, "seconds": round(last - start, 4), "steps_per_s": steps / (last - start)}

    def memory(self) -> dict[str, int]:
        if self.device.type != "cuda":
            return {}
        cuda = self.torch.cuda
        return {
            "max_allocated_mib": int(cuda.max_memory_allocated(self.device)) // _MIB,
            "reserved_mib": int(cuda.memory_reserved(self.device)) // _MIB,
        }


def serve(trainer: Trainer, warmup: int) -> None:
    t = time.perf_counter()
    for _ in range(warmup):
        trainer.step()
    emit(
        ready=True,
        job_type=trainer.ref.job_type,
        warmup_s=round(time.perf_counter() - t, 3),
        **trainer.memory(),
    )
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "run":
            emit(**trainer.run_window(float(words[1]), float(words[2])), **trainer.memory())


def batch_job(trainer: Trainer, steps: int, grow_to_mib: int, grow_rate: float) -> None:
    hoard: list[Any] = []
    started = time.time()
    extra_mib = 0
    for i in range(1, steps + 1):
        trainer.step()
        if grow_to_mib and extra_mib < grow_to_mib:
            target = min(grow_to_mib, int((time.time() - started) * grow_rate))
            while extra_mib + 256 <= target:
                hoard.append(
                    trainer.torch.empty(256 * _MIB, dtype=trainer.torch.uint8, device=trainer.device)
                )
                extra_mib += 256
                emit(t=round(time.time(), 3), grown_mib=extra_mib, **trainer.memory())
        if i % 50 == 0 or i == steps:
            emit(t=round(time.time(), 3), step=i, **trainer.memory())
    emit(done=True, steps=steps, seconds=round(time.time() - started, 3), **trainer.memory())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job-type", required=True, choices=sorted(KNOWN), metavar="JOB_TYPE")
    ap.add_argument("--device", default=os.environ.get("HORUS_TRAINER_DEVICE", "cuda"))
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--grow-to-mib", type=int, default=0)
    ap.add_argument("--grow-mib-per-s", type=float, default=2048.0)
    args = ap.parse_args(argv)
    trainer = Trainer(KNOWN[args.job_type], args.device)
    if args.serve:
        serve(trainer, args.warmup)
    else:
        batch_job(trainer, args.steps, args.grow_to_mib, args.grow_mib_per_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
