"""The product path of safe sharing on one GPU: section ``product`` of ``scripts/gpu-check``.

A real master and a real worker (``horus-worker`` with the NVML probe and the process runtime),
once per sharing mode (``--sharing timeslice``, then ``mps`` where the MPS control binary is
present), run two real PyTorch jobs with GPU memory caps on one GPU: a steady one, and one that
grows past its cap. Expected, per mode: the grower's first attempt ends for its memory (timeslice:
stopped by the worker's watchdog, ``GpuMemoryExceeded``; mps: refused by its pinned limit, CUDA's
out-of-memory error), the steady job SUCCEEDS at its first attempt, and the grower runs again alone
with a raised cap and SUCCEEDS; in mps mode the GPU's daemon was started for the second job and
quit once the GPU was idle, and none is left running. One JSON line per mode, with the jobs'
per-GPU use and caps as the master saw them. Every process is stopped at the end, whatever happens.

:func:`simulated_jobs` is its twin without a GPU (simulated V100, stand-in workloads, a fake MPS
binary on PATH): ``tests/e2e/test_gpu_product.py`` runs this very code in CI.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import pathlib
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAINER = ROOT / "scripts" / "gpu_trainer.py"
NEEDS = (
    "grpc",
    "google.protobuf",
    "aiosqlite",
    "numpy",
    "numba",
    "scipy",
    "aiohttp",
    "prometheus_client",
    "yaml",
)
MODES = ("timeslice", "mps")
Emit = Callable[..., None]


@dataclass(frozen=True)
class Jobs:
    """What one mode runs: the worker's GPU flags and the two jobs (command, job type, cap MiB)."""

    worker_flags: tuple[str, ...]
    steady: tuple[tuple[str, ...], str, int]
    grower: tuple[tuple[str, ...], str, int]
    limit_s: float  # per mode


def real_jobs(py: str = sys.executable) -> Jobs:
    """ResNet-50 steady under a 12 GiB cap; ResNet-18 growing 2 GiB/s by 8 GiB under a 4 GiB cap."""
    steady = (py, str(TRAINER), "--job-type", "ResNet-50 (batch size 64)", "--steps", "400")
    grower = (
        py,
        str(TRAINER),
        "--job-type",
        "ResNet-18 (batch size 32)",
        "--steps",
        "1500",
        "--grow-to-mib",
        "8192",
    )
    return Jobs(
        (), (steady, "ResNet-50 (batch size 64)", 12288), (grower, "ResNet-18 (batch size 32)", 4096), 100.0
    )


def simulated_jobs(py: str = sys.executable) -> Jobs:
    """The twin on one simulated V100: stand-in workloads that use and grow simulated memory."""
    wl = (py, "-m", "horus_core.workload", "--steps", "60")
    steady = (*wl, "--steps-per-s", "6", "--gpu-memory-mib", "2048")
    grower = (*wl, "--steps-per-s", "12", "--gpu-memory-mib", "3072", "--grow-to-mib", "10240")
    return Jobs(
        ("--fake-gpus", "1xV100"),
        (steady, "ResNet-18 (batch size 16)", 4096),
        (grower, "ResNet-18 (batch size 32)", 4096),
        60.0,
    )


def missing_modules() -> list[str]:
    """The project's dependencies this Python lacks (the daemons need them)."""
    return [m for m in NEEDS if importlib.util.find_spec(m.split(".")[0]) is None]


async def check_product(emit: Emit, jobs: Jobs, modes: Sequence[str] = MODES) -> bool:
    """Each mode in turn; True when every mode that ran met the expectations."""
    missing = missing_modules()
    if missing:
        emit("product", skipped=True, why=f"this Python lacks {', '.join(missing)}: pip install -e . first")
        return False
    ok = True
    for mode in modes:
        if mode == "mps" and shutil.which("nvidia-cuda-mps-control") is None:
            emit("product", mode=mode, skipped=True, why="nvidia-cuda-mps-control is not on PATH")
            continue
        with tempfile.TemporaryDirectory(prefix=f"horus-product-{mode}-") as tmp:
            ok = await _mode(emit, jobs, mode, pathlib.Path(tmp)) and ok
    return ok


async def _mode(emit: Emit, jobs: Jobs, mode: str, tmp: pathlib.Path) -> bool:
    procs: list[asyncio.subprocess.Process] = []
    before = mps_daemons()
    try:
        addr = await _start_master(tmp, procs)
        worker = [sys.executable, "-m", "worker.main", "--master", addr, "--name", f"gpu-{mode}"]
        worker += [
            "--runtime",
            "process",
            "--sharing",
            mode,
            "--state-dir",
            str(tmp / "worker"),
            "--grace-s",
            "5",
        ]
        procs.append(await _spawn([*worker, *jobs.worker_flags], tmp / "worker.log"))
        result = await asyncio.wait_for(_run_jobs(addr, jobs), jobs.limit_s)
    except Exception as err:  # (reported; the processes are stopped below all the same)
        result = {"ok": False, "error": repr(err)}
    finally:
        await _stop(procs)
    log = (tmp / "worker.log").read_text(errors="replace") if (tmp / "worker.log").exists() else ""
    started = len(re.findall(r"MPS daemon of GPU \S+ started", log))
    quit_ = len(re.findall(r"MPS daemon of GPU \S+ quit", log))
    left = [p for p in mps_daemons() if p not in before]
    mps = {"daemons_started": started, "daemons_quit": quit_, "left_running": left}
    ok = bool(result.get("ok")) and not left and (mode != "mps" or (started >= 1 and quit_ == started))
    emit(
        "product", mode=mode, **{**result, "ok": ok}, mps=mps, watchdog_lines=_lines(log, "GpuMemoryExceeded")
    )
    return ok


async def _run_jobs(addr: str, jobs: Jobs) -> dict[str, Any]:
    from horus_core import HorusClient
    from horus_core.model import JobSpec, JobState

    def spec(job: tuple[tuple[str, ...], str, int], name: str) -> JobSpec:
        return JobSpec(job[0], job_type=job[1], gpu_memory_mib=job[2], name=name, grace_s=5.0)

    async with HorusClient.connect(addr) as c:
        await _until(lambda: _ready(c), 30.0)
        steady = await c.submit(spec(jobs.steady, "steady"))
        await _until(lambda: _state(c, steady.id, JobState.RUNNING), 60.0)
        t0 = time.time()
        grower = await c.submit(spec(jobs.grower, "grower"))
        samples: list[tuple[float, str, int, int]] = []
        contained: dict[str, Any] = {}
        while True:
            g, s = await c.get(grower.id), await c.get(steady.id)
            for st in await c.gpus():
                samples += [
                    (round(time.time() - t0, 1), u.job_id, u.mem_used_mib, u.cap_mib) for u in st.jobs
                ]
            if g.contained_mib and not contained:
                contained = {"after_s": round(time.time() - t0, 1), "reason": g.reason, "code": g.reason_code}
            if g.state.terminal and s.state.terminal:
                break
            await asyncio.sleep(0.5)
        first = b"".join([chunk async for chunk in c.logs(grower.id, attempt=1)]).decode(errors="replace")
    names = {grower.id: "grower", steady.id: "steady"}
    over = [t for t, j, used, cap in samples if j == grower.id and cap and used > cap]
    alone = g.started_at is not None and s.finished_at is not None and g.started_at >= s.finished_at
    ok = (
        s.state is JobState.SUCCEEDED and s.attempt == 1 and g.state is JobState.SUCCEEDED
        and g.attempt >= 2 and g.contained_mib > jobs.grower[2] and alone
    )  # fmt: skip
    return {
        "ok": ok,
        "steady": {"state": s.state.value, "attempt": s.attempt, "cap_mib": s.gpu_memory_cap_mib},
        "grower": {
            "state": g.state.value, "attempt": g.attempt, "contained_mib": g.contained_mib,
            "first_attempt_peak_mib": g.gpu_memory_peak_mib, "ran_alone_after_steady": alone,
        },
        "contained": contained,
        "grower_seen_over_cap_at_s": over[0] if over else None,
        "first_attempt_tail": first[-600:],
        "caps_seen_mib": {names.get(j, j): sorted({c for _, k, _, c in samples if k == j}) for j in names},
        "per_job_gpu_mib": [(t, names.get(j, j), used, cap) for t, j, used, cap in samples][::4],
    }  # fmt: skip


async def _ready(c: Any) -> bool:
    return any(n.state.value == "READY" for n in await c.nodes())


async def _state(c: Any, job_id: str, state: Any) -> bool:
    job = await c.get(job_id)
    if job.state.terminal:
        raise RuntimeError(
            f"job {job_id} ended {job.state.value} before it was seen {state.value}: {job.reason}"
        )
    return bool(job.state is state)


async def _until(check: Callable[[], Any], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {limit_s:.0f} s")
        await asyncio.sleep(0.3)


async def _start_master(tmp: pathlib.Path, procs: list[asyncio.subprocess.Process]) -> str:
    args = [sys.executable, "-m", "master.main", "--listen", "127.0.0.1:0", "--db", str(tmp / "horus.db")]
    args += ["--policy", "horus", "--tick-s", "0.2", "--heartbeat-s", "0.5", "--min-speed", "0"]
    proc = await _spawn(args, tmp / "master.log", stdout=asyncio.subprocess.PIPE)
    procs.append(proc)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30.0)).decode()
    match = re.search(r"listening on (\S+)", line)
    if match is None:
        raise RuntimeError(f"the master did not start: {line!r}")
    return match.group(1)


async def _spawn(
    args: Sequence[str], log: pathlib.Path, stdout: int | None = None
) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = await asyncio.to_thread(open, log, "ab")
    try:
        return await asyncio.create_subprocess_exec(
            *args, stdout=stdout if stdout is not None else out, stderr=out, cwd=ROOT, env=env,
            start_new_session=True,
        )  # fmt: skip
    finally:
        out.close()


async def _stop(procs: list[asyncio.subprocess.Process]) -> None:
    """The worker first (it stops its jobs and quits its MPS daemons), then the master."""
    for proc in reversed(procs):
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


def mps_daemons() -> list[int]:
    """PIDs of MPS control daemons running in the foreground (``-f``) on this host."""
    out = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if any(a.endswith(b"nvidia-cuda-mps-control") for a in argv[:2]) and b"-f" in argv:
                    out.append(int(entry.name))
    return out


def _lines(text: str, needle: str) -> list[str]:
    return [line[-300:] for line in text.splitlines() if needle in line][:4]
