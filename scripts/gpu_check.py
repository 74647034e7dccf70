"""Validate Horus on a real NVIDIA GPU host; run it as ``scripts/gpu-check [--out DIR]``.

Checks, in order of value, each bounded so the whole run fits ``--budget-s`` (default 470 s):

1. host: GPU, driver, CUDA, compute and MIG mode, torch, whether MPS and Docker are present;
2. nvml: the worker's NVML probe against nvidia-smi while a CUDA load runs (driver-only load);
3. watchdog: two real PyTorch training processes share one GPU with memory caps; the one that
   grows past its cap is stopped by the watchdog's rule (``worker.sharing.watchdog``) and the
   other finishes; per-job NVML metrics of both;
4. pairs: real co-located training of the reference models (``horus_core.describe.reference``,
   random weights): each alone and every pair on one GPU, written as a throughput table in
   Gavel's format (``--throughputs``) plus each job's NVML utilisation and memory alone;
5. mps: an MPS control daemon in a private pipe directory, a pinned memory limit that refuses an
   over-limit allocation, and one training pair under MPS;
6. product: the product path (``scripts/gpu_product.py``): a real master and ``horus-worker``
   (NVML probe, process runtime) under ``--sharing timeslice`` then ``mps``, two PyTorch jobs with
   caps on the GPU: the grower stopped (``GpuMemoryExceeded``) or refused by its MPS limit, its
   neighbour SUCCEEDS, it runs again alone with a raised cap; the MPS daemon's life;
7. pytest: the ``gpu``-marked tests; 8. synthetic: two driver-only spin loads time-sliced.

With ``--zoo`` it measures the model zoo instead (after the host line, the same budget):
zoo-solo, every model of ``horus_core.describe.zoo`` alone at two batch sizes
(``scripts/gpu_zoo.py``: utilisation, memory, step rate, the card; ``DIR/zoo.jsonl``); zoo-pairs,
six of them spread over the measured utilisation, alone and in every pair
(``DIR/<gpu>_zoo.json``, Gavel's format); zoo-train, the card predictor retrained on the profiles
(``DIR/predictor-zoo.json``) and its leave-one-family-out utilisation RMSLE.

Every result is one JSON line on stdout and in ``DIR/gpu-check.jsonl``; the table is
``DIR/<gpu>_throughputs.json``. No downloads; nothing is left running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.metadata
import itertools
import json
import logging
import os
import pathlib
import platform
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from horus_core.model import JobSpec  # noqa: E402
from worker.gpu.base import GpuInfo, ProbeTarget, ProcessReading  # noqa: E402
from worker.gpu.nvml import NvmlProbe  # noqa: E402
from worker.sharing.watchdog import MemoryCap, breaches  # noqa: E402

TRAINER = ROOT / "scripts" / "gpu_trainer.py"
CUDA_LOAD = ROOT / "tests" / "gpu" / "cuda_load.py"
PAIR_WINDOW_S = 3.0
WATCH_PERIOD_S = 0.2
KILL_GRACE_S = 3.0


class Report:
    """JSON lines on stdout and in the output folder."""

    def __init__(self, out: pathlib.Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self._file = (out / "gpu-check.jsonl").open("a", encoding="utf-8")

    def emit(self, check: str, **fields: Any) -> None:
        line = json.dumps({"check": check, **fields}, default=_plain)
        print(line, flush=True)
        self._file.write(line + "\n")
        self._file.flush()


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


async def run_cmd(*argv: str, limit_s: float = 30.0, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a command; (exit status, stdout+stderr). 127 when it does not exist, 124 on timeout."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
        )
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), limit_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return 124, "timed out"
    return proc.returncode or 0, out.decode(errors="replace")


def gpu_env(uuid: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": uuid, **extra}


def find_tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for p in (pathlib.Path("/usr/local/nvidia/bin") / name,) if p.exists()), None
    )


def short_type(model: str) -> str:
    """'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' -> 'h100', 'Tesla V100-SXM2-16GB' -> 'v100'."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", model.upper().replace("NVIDIA", ""))
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


# ---------------------------------------------------------------------------------------- host


async def check_host(rep: Report) -> None:
    q = "index,uuid,name,driver_version,memory.total,ecc.mode.current,compute_mode,mig.mode.current"
    rc, smi = await run_cmd("nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader")
    _, header = await run_cmd("nvidia-smi")
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    _, torch_v = await run_cmd(
        sys.executable,
        "-c",
        "import torch, torchvision; print(torch.__version__, torch.version.cuda, torchvision.__version__)",
        limit_s=60,
    )
    docker = shutil.which("docker")
    docker_info = (await run_cmd("docker", "info", "--format", "{{json .Runtimes}}"))[1] if docker else ""
    rep.emit(
        "host",
        gpus=[line.strip() for line in smi.splitlines() if line.strip()] if rc == 0 else smi,
        cuda=cuda.group(1) if cuda else None,
        torch=torch_v.strip(),
        python=platform.python_version(),
        nvidia_ml_py=importlib.metadata.version("nvidia-ml-py"),
        kernel=platform.release(),
        root=os.geteuid() == 0,
        mps_control=find_tool("nvidia-cuda-mps-control"),
        docker=docker,
        docker_runtimes=docker_info.strip() or None,
        nvidia_container_toolkit=shutil.which("nvidia-container-runtime")
        or shutil.which("nvidia-container-toolkit"),
    )


# ---------------------------------------------------------------------------------------- nvml


async def check_nvml(rep: Report, probe: NvmlProbe, gpu: GpuInfo) -> None:
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CUDA_LOAD),
        "--mib",
        "4096",
        "--seconds",
        "8",
        "--busy",
        env=gpu_env(gpu.uuid),
        stdout=asyncio.subprocess.PIPE,
    )
    target = ProbeTarget("load", 1, (load.pid,), (gpu.uuid,), JobSpec(command=("load",)))
    await asyncio.sleep(3.0)
    await probe.read([target])  # starts the per-process utilisation window
    await asyncio.sleep(2.0)
    (gpus, procs), (_, smi), (_, apps) = await asyncio.gather(
        probe.read([target]),
        run_cmd(
            "nvidia-smi",
            "--query-gpu=uuid,utilization.gpu,utilization.memory,memory.used,memory.total,"
            "temperature.gpu,power.draw,ecc.errors.uncorrected.volatile.total",
            "--format=csv,noheader,nounits",
        ),
        run_cmd(
            "nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"
        ),
    )
    out, _ = await load.communicate()
    mine = [p for p in procs if p.pid == load.pid]
    reading = next(g for g in gpus if g.uuid == gpu.uuid)
    rep.emit(
        "nvml",
        probe_gpu=reading,
        probe_processes=procs,
        smi_gpu=smi.strip(),
        smi_apps=apps.strip(),
        load_attributed=bool(mine) and mine[0].mem_used_mib >= 4096,
        load_util_sm=mine[0].util_sm if mine else None,
        absent_fields=[k for k in ("temperature_c", "power_w", "util_mem") if not getattr(reading, k)],
        solo_spin=_json_tail(out),
    )


def _json_tail(data: bytes | str) -> dict[str, Any] | None:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


async def check_synthetic(rep: Report, gpu: GpuInfo) -> None:
    async def spin() -> dict[str, Any] | None:
        _, out = await run_cmd(
            sys.executable, str(CUDA_LOAD), "--mib", "1024", "--seconds", "5", "--busy", env=gpu_env(gpu.uuid)
        )
        return _json_tail(out)

    solo = await spin()
    a, b = await asyncio.gather(spin(), spin())
    rates = [x["kernels_per_s"] for x in (solo, a, b) if x]
    rep.emit(
        "synthetic",
        solo=solo,
        pair=[a, b],
        slowdown=[round(rates[0] / r, 3) for r in rates[1:]] if len(rates) == 3 else None,
    )


async def check_pytest(rep: Report) -> None:
    # Only our plugins: a host's other pytest plugins may not match the pytest this runs.
    plugins = ("-p", "pytest_asyncio.plugin", "-p", "pytest_timeout", "-p", "no:cacheprovider")
    rc, out = await run_cmd(
        sys.executable,
        *("-m", "pytest", "-m", "gpu", "tests/gpu", "-v", "-rs", *plugins),
        limit_s=150,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    summary = [line for line in out.splitlines() if "PASSED" in line or "FAILED" in line or "SKIP" in line]
    rep.emit("pytest", rc=rc, results=summary, tail=out.splitlines()[-15:] if rc else None)


# ---------------------------------------------------------------------------------------- trainers


@dataclass
class Instance:
    """One ``gpu_trainer.py --serve`` process, driven over stdin/stdout."""

    job_type: str
    proc: asyncio.subprocess.Process
    log: pathlib.Path
    ready: dict[str, Any] | None = None

    @classmethod
    async def start(cls, job_type: str, env: dict[str, str], logdir: pathlib.Path, tag: str) -> Instance:
        log = logdir / f"{tag}.log"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(TRAINER),
            "--job-type",
            job_type,
            "--serve",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log.open("wb"),
            start_new_session=True,
        )
        return cls(job_type, proc, log)

    async def line(self, limit_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), limit_s)
        if not raw:
            tail = self.log.read_text(errors="replace").splitlines()[-5:]
            raise RuntimeError(f"{self.job_type} exited: {' | '.join(tail)}")
        value = json.loads(raw)
        assert isinstance(value, dict)
        return value

    async def wait_ready(self, limit_s: float) -> None:
        self.ready = await self.line(limit_s)

    async def window(self, t0: float, seconds: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {t0} {seconds}\n".encode())
        await self.proc.stdin.drain()
        return await self.line(seconds + 60)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


@dataclass
class Sampler:
    """Per-process NVML readings of a set of instances, every half second, while a window runs."""

    probe: NvmlProbe
    instances: Sequence[Instance]
    util: dict[int, list[float]] = field(default_factory=dict)
    mem: dict[int, int] = field(default_factory=dict)

    async def run(self, seconds: float) -> None:
        targets = [
            ProbeTarget(i.job_type, 1, (i.proc.pid,), (), JobSpec(command=("t",))) for i in self.instances
        ]
        await self.probe.read(targets)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(0.5)
            _, procs = await self.probe.read(targets)
            for p in procs:
                if p.util_sm is not None:
                    self.util.setdefault(p.pid, []).append(p.util_sm)
                self.mem[p.pid] = max(self.mem.get(p.pid, 0), p.mem_used_mib)

    def of(self, inst: Instance) -> dict[str, Any]:
        u = self.util.get(inst.proc.pid, [])
        return {
            "util_avg": round(sum(u) / len(u), 1) if u else None,
            "util_peak": max(u) if u else None,
            "mem_mib": self.mem.get(inst.proc.pid),
        }


async def window(probe: NvmlProbe, group: Sequence[Instance], seconds: float) -> list[dict[str, Any]]:
    """Run the instances together for one window; each one's steps/s and NVML readings."""
    t0 = time.time() + 0.3
    sampler = Sampler(probe, group)
    results, _ = await asyncio.gather(
        asyncio.gather(*(i.window(t0, seconds) for i in group)), sampler.run(seconds + 0.3)
    )
    return [{**r, **sampler.of(i)} for r, i in zip(results, group, strict=True)]


async def start_all(
    wanted: Sequence[tuple[str, str]], env: dict[str, str], logdir: pathlib.Path, limit_s: float
) -> dict[str, Instance]:
    """Start every (tag, job type); the ones ready within the timeout, by tag."""
    insts = {tag: await Instance.start(jt, env, logdir, tag) for tag, jt in wanted}
    outcomes = await asyncio.gather(*(i.wait_ready(limit_s) for i in insts.values()), return_exceptions=True)
    ready = {}
    for (tag, inst), outcome in zip(insts.items(), outcomes, strict=True):
        if isinstance(outcome, BaseException):
            await inst.stop()
        else:
            ready[tag] = inst
    return ready


# ---------------------------------------------------------------------------------------- pairs


async def check_pairs(
    rep: Report, probe: NvmlProbe, gpu: GpuInfo, job_types: Sequence[str], table_name: str = "throughputs"
) -> None:
    logdir = pathlib.Path(tempfile.mkdtemp(prefix="horus-pairs-"))
    wanted = [(f"{n}.{k}", jt) for n, jt in enumerate(job_types) for k in (0, 1)]
    insts = await start_all(wanted, gpu_env(gpu.uuid), logdir, limit_s=150)
    try:
        types = [jt for n, jt in enumerate(job_types) if f"{n}.0" in insts]
        missing = sorted(set(job_types) - set(types))
        rep.emit(
            "pairs-start",
            ready={i.job_type: i.ready for t, i in insts.items() if t.endswith(".0")},
            missing=missing,
        )
        first = {jt: insts[f"{job_types.index(jt)}.0"] for jt in types}
        second = {jt: insts.get(f"{job_types.index(jt)}.1") for jt in types}
        solo: dict[str, list[dict[str, Any]]] = {jt: [] for jt in types}
        pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}

        async def solos() -> None:
            for jt in types:
                solo[jt].append((await window(probe, [first[jt]], PAIR_WINDOW_S))[0])

        await solos()
        for a, b in itertools.combinations_with_replacement(types, 2):
            other = first[b] if a != b else second[a]
            if other is None:
                continue
            pairs[(a, b)] = await window(probe, [first[a], other], PAIR_WINDOW_S)
        await solos()
    finally:
        await asyncio.gather(*(i.stop() for i in insts.values()))
    table = pair_table(solo, pairs)
    name = short_type(gpu.model)
    path = rep.out / f"{name}_{table_name}.json"
    path.write_text(json.dumps({name: table}, indent=1, sort_keys=True))
    for jt in types:
        s = [r["steps_per_s"] for r in solo[jt]]
        first_run = {k: v for k, v in solo[jt][0].items() if k not in ("steps", "seconds", "steps_per_s")}
        rep.emit("solo", job_type=jt, steps_per_s=s, drift=round(s[-1] / s[0] - 1, 4), **first_run)
    for (a, b), (ra, rb) in pairs.items():
        sa, sb = (sum(r["steps_per_s"] for r in solo[x]) / len(solo[x]) for x in (a, b))
        rep.emit(
            "pair",
            a=a,
            b=b,
            speed_a=round(ra["steps_per_s"] / sa, 4),
            speed_b=round(rb["steps_per_s"] / sb, 4),
            util=[ra["util_avg"], rb["util_avg"]],
            mem_mib=[ra["mem_mib"], rb["mem_mib"]],
        )
    rep.emit("pairs-table", path=str(path), gpu_type=name, job_types=types, pairs=len(pairs))


def pair_table(
    solo: dict[str, list[dict[str, Any]]], pairs: dict[tuple[str, str], list[dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """Gavel's format: {"('<type>', 1)": {"null": solo steps/s, "('<other>', 1)": [mine, other's]}}."""
    table: dict[str, dict[str, Any]] = {}
    for jt, runs in solo.items():
        table[repr((jt, 1))] = {"null": sum(r["steps_per_s"] for r in runs) / len(runs)}
    for (a, b), (ra, rb) in pairs.items():
        table[repr((a, 1))][repr((b, 1))] = [ra["steps_per_s"], rb["steps_per_s"]]
        table[repr((b, 1))][repr((a, 1))] = [rb["steps_per_s"], ra["steps_per_s"]]
    return table


# ---------------------------------------------------------------------------------------- zoo

ZOO_PAIR_TYPES = 6  # the zoo's subset measured in pairs (21 pairs with the self-pairs)


async def check_zoo_solo(rep: Report, gpu: GpuInfo, budget_s: float) -> None:
    """scripts/gpu_zoo.py on this GPU: every zoo model alone at two batch sizes (DIR/zoo.jsonl)."""
    argv = [str(ROOT / "scripts" / "gpu_zoo.py"), "--out", str(rep.out), "--gpu-uuid", gpu.uuid]
    code, out = await run_cmd(sys.executable, *argv, "--budget-s", f"{budget_s:.0f}", limit_s=budget_s + 90,
                              env=gpu_env(gpu.uuid))  # fmt: skip
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    rep.emit(
        "zoo-solo",
        exit=code,
        profiled=sum(1 for x in lines if "util_avg" in x),
        failed=[x["job_type"] for x in lines if "error" in x],
        skipped=sum(1 for x in lines if "skipped" in x),
        families=len({x["family"] for x in lines if "util_avg" in x}),
        path=str(rep.out / "zoo.jsonl"),
    )


def zoo_pair_types(path: pathlib.Path, count: int = ZOO_PAIR_TYPES) -> list[str]:
    """``count`` profiled zoo job types spread evenly over the measured utilisation."""
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    done = sorted((r for r in rows if r.get("util_avg") is not None), key=lambda r: float(r["util_avg"]))
    if len(done) <= count:
        return [r["job_type"] for r in done]
    return [done[round(i * (len(done) - 1) / (count - 1))]["job_type"] for i in range(count)]


async def check_zoo_train(rep: Report) -> None:
    """The predictor retrained on the zoo (DIR/predictor-zoo.json) and its held-out error."""
    zoo = str(rep.out / "zoo.jsonl")
    module = "horus_core.interference.train"
    code, out = await run_cmd(sys.executable, "-m", module, "--zoo", zoo, "--report", limit_s=120)
    for line in out.splitlines():
        if line.startswith("{"):
            rep.emit("zoo-predictor", **json.loads(line))
    target = str(rep.out / "predictor-zoo.json")
    code2, out2 = await run_cmd(sys.executable, "-m", module, "--zoo", zoo, "--out", target, limit_s=120)
    rep.emit("zoo-retrained", exit=[code, code2], path=target, said=out2.strip()[-300:])


# ---------------------------------------------------------------------------------------- watchdog


async def check_watchdog(rep: Report, probe: NvmlProbe, gpu: GpuInfo) -> None:
    """A steady job and a growing one share the GPU; the grower is stopped above its cap."""

    async def job(args: Sequence[str]) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            str(TRAINER),
            *args,
            env=gpu_env(gpu.uuid),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )

    steady = await job(["--job-type", "ResNet-50 (batch size 64)", "--steps", "150"])
    grower = await job(
        ["--job-type", "ResNet-18 (batch size 32)", "--steps", "1000000", "--grow-to-mib", "16384"]
    )
    caps = [
        MemoryCap("steady", 1, (steady.pid,), 20480),
        MemoryCap("grower", 1, (grower.pid,), 4096),
    ]
    targets = [ProbeTarget(c.job_id, 1, c.pids, (gpu.uuid,), JobSpec(command=("t",))) for c in caps]
    series: dict[str, list[tuple[float, int, float | None]]] = {"steady": [], "grower": []}
    last_below: float | None = None
    detected: float | None = None
    stopped: float | None = None
    start = time.monotonic()
    await probe.read(targets)
    while steady.returncode is None and time.monotonic() - start < 120:
        await asyncio.sleep(WATCH_PERIOD_S)
        _, procs = await probe.read(targets)
        now = time.monotonic() - start
        for c in caps:
            used = _used(procs, c.pids[0])
            if used is not None:
                series[c.job_id].append((round(now, 2), used[0], used[1]))
        grower_used = _used(procs, grower.pid)
        if detected is None and grower_used is not None and grower_used[0] <= caps[1].cap_mib:
            last_below = now
        for breach in breaches(caps, procs):
            if breach.cap.job_id == "grower" and detected is None:
                detected = now
                os.killpg(grower.pid, signal.SIGTERM)
                asyncio.get_running_loop().call_later(KILL_GRACE_S, _kill_group, grower.pid)
            elif breach.cap.job_id == "steady":
                rep.emit("watchdog-unexpected", breach=breach)
        if grower.returncode is not None and stopped is None and detected is not None:
            stopped = now
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(steady.wait(), 0.001)
    _kill_group(grower.pid)
    _kill_group(steady.pid)
    grower_out, _ = await grower.communicate()
    steady_out, _ = await steady.communicate()
    rep.emit(
        "watchdog",
        grower_cap_mib=caps[1].cap_mib,
        grower_rc=grower.returncode,
        detected_after_crossing_s=round(detected - last_below, 2) if detected and last_below else None,
        stopped_after_detection_s=round(stopped - detected, 2) if stopped and detected else None,
        steady_rc=steady.returncode,
        steady_result=_json_tail(steady_out),
        grower_last=_json_tail(grower_out),
        steady_series=series["steady"][::5],
        grower_series=series["grower"],
        ok=steady.returncode == 0 and detected is not None,
    )


def _tails(folder: pathlib.Path) -> list[str]:
    return [p.read_text(errors="replace")[-300:] for p in sorted(folder.glob("*.log"))]


def _used(procs: Sequence[ProcessReading], pid: int) -> tuple[int, float | None] | None:
    mine = [p for p in procs if p.pid == pid]
    return (sum(p.mem_used_mib for p in mine), mine[0].util_sm) if mine else None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------- mps

_MPS_ALLOC = """
import json, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
try:
    y = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    print(json.dumps({"over_limit_alloc": "succeeded"}))
except torch.OutOfMemoryError as err:
    print(json.dumps({"over_limit_alloc": "refused", "error": str(err).splitlines()[0][:160]}))
"""


async def check_mps(rep: Report, probe: NvmlProbe, gpu: GpuInfo) -> None:
    control = find_tool("nvidia-cuda-mps-control")
    if control is None:
        rep.emit("mps", available=False, why="nvidia-cuda-mps-control is not installed on this host")
        return
    base = pathlib.Path(tempfile.mkdtemp(prefix="horus-mps-"))
    (base / "pipe").mkdir()
    (base / "log").mkdir()
    env = gpu_env(
        gpu.uuid, CUDA_MPS_PIPE_DIRECTORY=str(base / "pipe"), CUDA_MPS_LOG_DIRECTORY=str(base / "log")
    )
    rc, out = await run_cmd(control, "-d", env=env)
    if rc != 0:
        rep.emit("mps", available=False, why=f"control daemon did not start: rc={rc} {out.strip()[:200]}")
        return
    insts: dict[str, Instance] = {}
    try:
        limited = {**env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2G"}
        rc, out = await run_cmd(sys.executable, "-c", _MPS_ALLOC, env=limited, limit_s=90)
        rep.emit("mps-memory-limit", limit="0=2G", rc=rc, result=_json_tail(out), tail=out.strip()[-300:])
        shared = {**env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}
        wanted = [("r18", "ResNet-18 (batch size 32)"), ("r50", "ResNet-50 (batch size 64)")]
        insts = await start_all(wanted, shared, base, limit_s=120)
        if len(insts) == 2:
            a = (await window(probe, [insts["r18"]], PAIR_WINDOW_S))[0]
            b = (await window(probe, [insts["r50"]], PAIR_WINDOW_S))[0]
            pa, pb = await window(probe, [insts["r18"], insts["r50"]], PAIR_WINDOW_S)
            rep.emit(
                "mps-pair",
                active_thread_percentage=50,
                solo=[a["steps_per_s"], b["steps_per_s"]],
                pair=[pa["steps_per_s"], pb["steps_per_s"]],
                speeds=[
                    round(pa["steps_per_s"] / a["steps_per_s"], 4),
                    round(pb["steps_per_s"] / b["steps_per_s"], 4),
                ],
            )
        else:
            rep.emit("mps-pair", started=sorted(insts), logs=_tails(base))
        _, servers = await run_cmd("sh", "-c", f"echo get_server_list | {control}", env=env)
        rep.emit("mps-servers", servers=servers.strip())
    finally:
        await asyncio.gather(*(i.stop() for i in insts.values()))
        rc, out = await run_cmd("sh", "-c", f"echo quit | {control}", env=env)
        await asyncio.sleep(1.0)
        _, ps = await run_cmd("sh", "-c", "pgrep -fa nvidia-cuda-mps || true")
        log = base / "log" / "control.log"
        rep.emit(
            "mps-quit",
            rc=rc,
            left_running=ps.strip() or None,
            control_log=log.read_text()[-400:] if log.exists() else None,
        )


# ---------------------------------------------------------------------------------------- main


async def _product(rep: Report) -> None:
    from gpu_product import check_product, real_jobs

    await check_product(rep.emit, real_jobs())


class _Captured(logging.Handler):
    """Keeps what the probe logs while it opens (e.g. that Xid events are not available)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--out", type=pathlib.Path, default=pathlib.Path(os.environ.get("OUT") or "runs/gpu-check")
    )
    ap.add_argument("--budget-s", type=float, default=470.0)
    ap.add_argument("--only", default="", help="comma-separated checks to run (default: all)")
    ap.add_argument(
        "--zoo",
        action="store_true",
        help="measure the model zoo instead: solo profiles, pairs of a subset, the retrained predictor",
    )
    args = ap.parse_args(argv)
    rep = Report(args.out)
    deadline = time.monotonic() + args.budget_s
    await check_host(rep)
    opened = _Captured()
    nvml_log = logging.getLogger("worker.gpu.nvml")
    nvml_log.setLevel(logging.INFO)
    nvml_log.addHandler(opened)
    probe = await NvmlProbe.open()
    gpu = (await probe.gpus())[0]
    rep.emit(
        "nvml-open",
        gpus=await probe.gpus(),
        log=opened.lines,
        xid_events_registered=not any("Xid events not available" in line for line in opened.lines),
    )
    from horus_core.describe.reference import GPU_CHECK

    sections: list[tuple[str, float, Callable[[], Awaitable[None]]]] = [
        ("zoo-solo", 200, lambda: check_zoo_solo(rep, gpu, deadline - time.monotonic() - 190)),
        (
            "zoo-pairs",
            150,
            lambda: check_pairs(rep, probe, gpu, zoo_pair_types(rep.out / "zoo.jsonl"), "zoo"),
        ),
        ("zoo-train", 20, lambda: check_zoo_train(rep)),
    ]
    if not args.zoo:
        sections = [
            ("nvml", 20, lambda: check_nvml(rep, probe, gpu)),
            ("watchdog", 60, lambda: check_watchdog(rep, probe, gpu)),
            ("pairs", 170, lambda: check_pairs(rep, probe, gpu, list(GPU_CHECK))),
            ("mps", 60, lambda: check_mps(rep, probe, gpu)),
            ("product", 130, lambda: _product(rep)),
            ("pytest", 45, lambda: check_pytest(rep)),
            ("synthetic", 12, lambda: check_synthetic(rep, gpu)),
        ]
    only = {s for s in args.only.split(",") if s}
    failed = 0
    for name, estimate, section in sections:
        left = deadline - time.monotonic()
        if only and name not in only:
            continue
        if left < estimate:
            rep.emit(
                "skipped", section=name, why=f"{left:.0f} s left of the budget, it needs about {estimate:.0f}"
            )
            continue
        t = time.monotonic()
        try:
            await asyncio.wait_for(section(), left)
        except Exception as err:  # a failed section is reported; the others still run
            failed += 1
            rep.emit("error", section=name, error=repr(err), trace=traceback.format_exc()[-1500:])
        rep.emit("section", name=name, seconds=round(time.monotonic() - t, 1))
    await probe.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
