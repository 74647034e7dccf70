"""How long ``hctl`` takes to start, against the interpreter's own start, measured in one run.

Runs, alternately and ``--repeat`` times each: ``python -c pass`` (the reference), ``hctl
--version`` and ``hctl jobs`` against a real master subprocess on an empty database. Prints one
JSON line per command with the median wall time and the median CPU time (user + system) of the
process, and ``over_python_ms``: its median above the reference's, which the target (issue 29:
under 300 ms) judges, e.g.

    {"bench": "cli_startup", "cmd": "hctl jobs", "wall_ms": 251.0, "over_python_ms": 212.3, ...}

    python bench/cli_startup.py [--repeat 15]

``imports`` on the last line counts the modules hctl loads to parse a command, and lists
any of the scheduler's numerical stack (numpy, numba, scipy) among them (there should be none).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent
TARGET_MS = 300.0
HEAVY = ("numpy", "numba", "scipy", "matplotlib")


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``argv``; fails if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def start_master(db: pathlib.Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [str(BIN / "horus-master"), "--listen", "127.0.0.1:0", "--db", str(db), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, "127.0.0.1:" + line.rsplit(":", 1)[1].strip()


def imported() -> dict[str, object]:
    code = (
        "import sys, json, horus_core.cli.main as m; m.build_parser();print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    mods = json.loads(out.stdout)
    return {"modules": len(mods), "heavy": sorted({m.split(".")[0] for m in mods} & set(HEAVY))}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="runs of each command (alternating)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        master, addr = start_master(pathlib.Path(tmp) / "horus.db")
        try:
            hctl = str(BIN / "hctl")
            cmds = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "hctl --version": [hctl, "--version"],
                "hctl jobs": [hctl, "--master", addr, "jobs"],
            }
            timed(cmds["hctl jobs"])  # the master's first answer and the page cache: not measured
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
            for _ in range(args.repeat):
                for name, argv in cmds.items():
                    runs[name].append(timed(argv))
        finally:
            master.terminate()
            master.wait(timeout=30)
            if master.stdout:
                master.stdout.close()
    ref = statistics.median(w for w, _ in runs["python -c pass"]) * 1000
    ref_cpu = statistics.median(c for _, c in runs["python -c pass"]) * 1000
    for name, got in runs.items():
        wall = statistics.median(w for w, _ in got) * 1000
        cpu = statistics.median(c for _, c in got) * 1000
        line = {"bench": "cli_startup", "cmd": name, "n": len(got), "wall_ms": round(wall, 1),
                "cpu_ms": round(cpu, 1), "over_python_ms": round(wall - ref, 1),
                "over_python_cpu_ms": round(cpu - ref_cpu, 1), "target_ms": TARGET_MS}  # fmt: skip
        if name != "python -c pass":
            line["within_target"] = wall - ref < TARGET_MS
        print(json.dumps(line), flush=True)
    print(json.dumps({"bench": "cli_startup", "what": "imports", **imported()}), flush=True)


if __name__ == "__main__":
    main()
