"""Simulated workers for bench/load.py: one process holding many worker streams to a master.

Each simulated worker opens its own channel and ``WorkerService.Connect`` stream (the generated
stubs: the real worker protocol, docs/protocol.md), registers ``--gpus`` simulated V100s, then
heartbeats at the interval the master's ``Registered`` asks for, with GPU readings that follow the
attempts it runs. An Assignment is answered RUNNING at once and SUCCEEDED after about ``--job-s``
seconds; a Kill ends the attempt (CANCELLED). Prints ``{"ready": N}`` once all N are registered,
runs until its stdin closes, then prints one JSON line of counts and exits.

    python bench/load_workers.py --port PORT --first 0 --count 250
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass, field

import grpc

from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.gen import worker_pb2_grpc as wgrpc

GPU_MODEL = "Tesla V100-SXM2-16GB"
GPU_MIB = 16_160
JOB_UTIL = 45.0  # % SM utilisation one simulated attempt adds to its GPUs
JOB_MIB = 3_000
Call = grpc.aio.StreamStreamCall[wpb.WorkerMessage, wpb.MasterMessage]


@dataclass
class Counts:
    registered: int = 0
    heartbeats: int = 0
    assigned: int = 0
    finished: int = 0
    killed: int = 0
    errors: int = 0


@dataclass
class Attempt:
    gpus: tuple[str, ...]
    ends_at: float


@dataclass
class SimWorker:
    name: str
    n_gpus: int
    job_s: float
    counts: Counts
    rng: random.Random
    running: dict[tuple[str, int], Attempt] = field(default_factory=dict)
    out: asyncio.Queue[wpb.WorkerMessage | None] = field(default_factory=asyncio.Queue)

    @property
    def uuids(self) -> list[str]:
        return [f"GPU-{self.name}-{i}" for i in range(self.n_gpus)]

    def register(self) -> wpb.WorkerMessage:
        gpus = [
            pb.Gpu(uuid=u, node=self.name, index=i, model=GPU_MODEL, memory_mib=GPU_MIB, healthy=True)
            for i, u in enumerate(self.uuids)
        ]
        return wpb.WorkerMessage(register=wpb.Register(name=self.name, gpus=gpus, version="load-bench"))

    def heartbeat(self) -> wpb.WorkerMessage:
        per_gpu: dict[str, int] = {u: 0 for u in self.uuids}
        jobs = []
        for (job_id, attempt), a in self.running.items():
            for u in a.gpus:
                per_gpu[u] = per_gpu.get(u, 0) + 1
                jobs.append(
                    pb.JobGpuStats(
                        job_id=job_id, attempt=attempt, gpu_uuid=u, util_sm=JOB_UTIL, mem_used_mib=JOB_MIB
                    )
                )
        stats = [
            pb.GpuStats(
                uuid=u,
                util_sm=min(100.0, n * JOB_UTIL + self.rng.uniform(0, 3)),
                util_mem=min(100.0, n * 20.0),
                mem_used_mib=min(GPU_MIB, n * JOB_MIB),
                mem_total_mib=GPU_MIB,
                temperature_c=40.0 + 10 * n,
                power_w=60.0 + 80 * n,
                healthy=True,
            )
            for u, n in per_gpu.items()
        ]
        refs = [wpb.AttemptRef(job_id=j, attempt=a) for j, a in self.running]
        return wpb.WorkerMessage(heartbeat=wpb.Heartbeat(gpus=stats, jobs=jobs, running=refs))

    def update(self, key: tuple[str, int], state: pb.JobState.ValueType, reason: str = "") -> None:
        upd = wpb.AttemptUpdate(job_id=key[0], attempt=key[1], state=state, reason=reason, at=time.time())
        if state == pb.JOB_STATE_SUCCEEDED:
            upd.exit_code = 0
        self.out.put_nowait(wpb.WorkerMessage(update=upd))

    def on_message(self, msg: wpb.MasterMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "assign":
            key = (msg.assign.job_id, msg.assign.attempt)
            duration = self.job_s * self.rng.uniform(0.5, 1.5)
            self.running[key] = Attempt(tuple(msg.assign.gpus), time.monotonic() + duration)
            self.counts.assigned += 1
            self.update(key, pb.JOB_STATE_RUNNING)
        elif kind == "kill":
            key = (msg.kill.job_id, msg.kill.attempt)
            if self.running.pop(key, None) is not None:
                self.counts.killed += 1
                self.update(key, pb.JOB_STATE_CANCELLED, msg.kill.reason[:200])

    def finish_due(self) -> None:
        now = time.monotonic()
        for key in [k for k, a in self.running.items() if a.ends_at <= now]:
            del self.running[key]
            self.counts.finished += 1
            self.update(key, pb.JOB_STATE_SUCCEEDED)

    async def send_all(self, call: Call) -> None:
        """The stream's one writer: the queue, in order."""
        while (msg := await self.out.get()) is not None:
            await call.write(msg)

    async def beat(self, interval_s: float) -> None:
        await asyncio.sleep(self.rng.uniform(0, interval_s))  # spread the workers over the interval
        while True:
            self.finish_due()
            self.out.put_nowait(self.heartbeat())
            self.counts.heartbeats += 1
            await asyncio.sleep(interval_s)

    async def run(self, target: str, all_registered: asyncio.Event, total: int) -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            call: Call = wgrpc.WorkerServiceStub(channel).Connect()  # type: ignore[call-arg]
            await call.write(self.register())
            first = await call.read()
            if not isinstance(first, wpb.MasterMessage) or first.WhichOneof("msg") != "registered":
                raise RuntimeError(f"{self.name}: expected Registered, got {first!r}")
            self.counts.registered += 1
            if self.counts.registered == total:
                all_registered.set()
            beat = asyncio.create_task(self.beat(first.registered.heartbeat_interval_s))
            writer = asyncio.create_task(self.send_all(call))
            try:
                while isinstance(msg := await call.read(), wpb.MasterMessage):
                    self.on_message(msg)
            finally:
                beat.cancel()
                writer.cancel()


async def stdin_closed() -> None:
    await asyncio.to_thread(sys.stdin.read)


async def hold(args: argparse.Namespace) -> Counts:
    counts = Counts()
    target = f"127.0.0.1:{args.port}"
    ready = asyncio.Event()
    workers = [
        SimWorker(f"load-{i:05d}", args.gpus, args.job_s, counts, random.Random(args.seed * 100_003 + i))
        for i in range(args.first, args.first + args.count)
    ]
    tasks = [asyncio.create_task(w.run(target, ready, args.count)) for w in workers]
    waiter = asyncio.create_task(ready.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for t in done - {waiter}:  # a stream that failed before all registered
        if t.exception() is not None:
            counts.errors += 1
            print(f"load_workers: {t.exception()!r}", file=sys.stderr)
    print(json.dumps({"ready": counts.registered}), flush=True)
    await stdin_closed()
    for t in tasks:
        t.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    counts.errors += sum(
        1 for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    )
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--first", type=int, default=0, help="number of the first worker (names load-NNNNN)")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--gpus", type=int, default=4, help="simulated GPUs per worker")
    ap.add_argument("--job-s", type=float, default=20.0, help="mean run time of an attempt")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts = asyncio.run(hold(args))
    print(json.dumps(counts.__dict__), flush=True)


if __name__ == "__main__":
    main()
