"""Solo profiles of the model zoo (``horus_core.describe.zoo``) on one GPU, for
``scripts/gpu-check --zoo`` (needs torch and torchvision; random weights, no downloads).

    python scripts/gpu_zoo.py --out DIR [--models resnet18,vgg16] [--batches 16,64] [--window-s 1]
    python scripts/gpu_zoo.py --out DIR --simulate v100 --device cpu --size 32 ...   # tests, no GPU

One process trains the models one after another (torch is imported once), each for a warm-up and
one timed window while a thread samples NVML every 0.1 s. ``DIR/zoo.jsonl`` gets one line per
(model, batch): ``job_type``, ``family``, ``model``, ``batch``, ``gpu``, ``card`` (described on
the meta device, as ``hctl describe`` would), ``steps_per_s``, ``util_avg`` and ``util_peak``
(% of the GPU, NVML's device utilisation: the model runs alone), ``mem_mib`` (the peak the
allocator reserved, plus the CUDA context). A model that fails (out of memory, say) gets a line
with ``error``; one the budget leaves no time for gets ``skipped``.

``--simulate GPU`` is a simulated GPU for tests on a machine without one: the steps still run
(on ``--device``), but the readings come from the card on the named GPU's roofline (compute and
memory traffic over peak, plus a fixed cost per dispatched operator), not from NVML.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import pathlib
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_trainer import Trainer  # noqa: E402

from horus_core.describe.cards import reference_card  # noqa: E402
from horus_core.describe.reference import Reference  # noqa: E402
from horus_core.describe.zoo import ZOO_BATCHES, zoo_references  # noqa: E402
from horus_core.interference.gpus import GPUS  # noqa: E402
from horus_core.interference.predictor import roofline_seconds  # noqa: E402
from horus_core.modelcard import ModelCard, card_to_dict  # noqa: E402

_MIB = 1 << 20
SAMPLE_S = 0.1
SIM_OP_S = 6e-6  # a simulated GPU's cost per dispatched operator (a kernel launch)
SIM_CONTEXT_MIB = 500


@dataclass
class NvmlMeter:
    """The GPU's utilisation, sampled in a thread while a window runs; memory from the allocator."""

    uuid: str = ""
    samples: list[float] = field(default_factory=list)
    context_mib: int = 0

    def __post_init__(self) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = (
            pynvml.nvmlDeviceGetHandleByUUID(self.uuid) if self.uuid else pynvml.nvmlDeviceGetHandleByIndex(0)
        )
        self.name = str(pynvml.nvmlDeviceGetName(self.handle))

    @contextlib.contextmanager
    def window(self, card: ModelCard, trainer: Trainer) -> Iterator[None]:
        del card
        self.samples = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_S):
                self.samples.append(float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu))

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
        if not self.context_mib:
            self.context_mib = self._context_mib(trainer)

    def _context_mib(self, trainer: Trainer) -> int:
        """What NVML counts for this process beyond what the allocator reserved: the context."""
        import os

        reserved = int(trainer.torch.cuda.memory_reserved(trainer.device)) // _MIB
        for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory:
                return max(0, int(proc.usedGpuMemory) // _MIB - reserved)
        return 0

    def readings(self, card: ModelCard, trainer: Trainer, steps_per_s: float) -> dict[str, Any]:
        del card, steps_per_s
        u = self.samples[1:] or self.samples  # the first sample may straddle the window's start
        peak = int(trainer.torch.cuda.max_memory_reserved(trainer.device)) // _MIB
        return {
            "util_avg": round(sum(u) / len(u), 1) if u else None,
            "util_peak": max(u) if u else None,
            "mem_mib": peak + self.context_mib,
        }


@dataclass
class SimulatedMeter:
    """A simulated GPU: readings from the card on the GPU's roofline (see the module's note)."""

    name: str

    @contextlib.contextmanager
    def window(self, card: ModelCard, trainer: Trainer) -> Iterator[None]:
        del card, trainer
        yield

    def readings(self, card: ModelCard, trainer: Trainer, steps_per_s: float) -> dict[str, Any]:
        del trainer, steps_per_s
        busy = roofline_seconds(card, GPUS[self.name])
        step = busy + SIM_OP_S * max(card.ops_step, 1)
        util = 100.0 * busy / step
        counted = (card.static_bytes + card.activation_bytes) // _MIB
        return {
            "util_avg": round(util, 1),
            "util_peak": round(min(100.0, 1.15 * util), 1),
            "mem_mib": counted + SIM_CONTEXT_MIB,
        }


Meter = NvmlMeter | SimulatedMeter


def profile(ref: Reference, meter: Meter, device: str, warmup: int, window_s: float) -> dict[str, Any]:
    """One model alone: its card, steps/s over one window, and the meter's readings."""
    card = reference_card(ref)
    trainer = Trainer(ref, device)
    try:
        if trainer.device.type == "cuda":
            trainer.torch.cuda.reset_peak_memory_stats(trainer.device)
        for _ in range(warmup):
            trainer.step()
        with meter.window(card, trainer):
            run = trainer.run_window(time.time(), window_s)
        return {
            "card": card_to_dict(card),
            "steps_per_s": round(run["steps_per_s"], 4),
            **meter.readings(card, trainer, run["steps_per_s"]),
        }
    finally:
        del trainer
        gc.collect()
        with contextlib.suppress(Exception):
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def run(args: argparse.Namespace) -> int:
    refs = zoo_references(tuple(m for m in args.models.split(",") if m), args.batches, args.size)
    meter: Meter = SimulatedMeter(args.simulate) if args.simulate else NvmlMeter(args.gpu_uuid)
    gpu = args.simulate or meter_gpu(meter)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "zoo.jsonl"
    deadline = time.monotonic() + args.budget_s
    failed = 0
    with path.open("w", encoding="utf-8") as out:
        for ref in refs:
            head = {
                "check": "zoo-solo",
                "job_type": ref.job_type,
                "family": ref.family,
                "batch": ref.batch,
                "gpu": gpu,
            }
            head["model"] = ref.job_type.split(" ")[0].removeprefix("torchvision:")
            if time.monotonic() > deadline:
                line = head | {"skipped": f"the budget of {args.budget_s:.0f} s was spent"}
            else:
                t = time.monotonic()
                try:
                    line = head | profile(ref, meter, args.device, args.warmup, args.window_s)
                except Exception as exc:  # one model failing (out of memory) leaves the others
                    failed += 1
                    line = head | {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                line["seconds"] = round(time.monotonic() - t, 2)
            out.write(json.dumps(line) + "\n")
            out.flush()
            print(json.dumps({k: v for k, v in line.items() if k != "card"}), flush=True)
    return 1 if failed == len(refs) else 0


def meter_gpu(meter: Meter) -> str:
    """The zoo's GPU type in the names of ``horus_core.interference.gpus`` ("NVIDIA H100 80GB
    HBM3" -> "h100"); the full name where none matches."""
    name = meter.name.lower()
    return next((g for g in sorted(GPUS, key=len, reverse=True) if g in name), meter.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("--models", default="", help="comma-separated torchvision names (default: the whole zoo)")
    ap.add_argument("--batches", type=lambda s: tuple(int(b) for b in s.split(",")), default=ZOO_BATCHES)
    ap.add_argument("--size", type=int, default=224, help="image side (default 224)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gpu-uuid", default="", help="the NVML device to read (default: index 0)")
    ap.add_argument(
        "--simulate", default="", choices=["", *sorted(GPUS)], help="a simulated GPU of this type"
    )
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=1.0)
    ap.add_argument("--budget-s", type=float, default=300.0)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
