"""``make demo`` on a fresh clone (issue 29, item 3): with an empty Numba cache, so the packing
kernels compile during the run, the demo still shows GPUs shared by two or more jobs: it
compiles them ahead and waits on placements, not on a clock."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_demo_shows_shared_gpus_on_a_cold_numba_cache(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HORUS_MASTER"}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")  # empty: as on a fresh clone
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--skip-comparison"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "Preparing the scheduler's compiled kernels" in out
    assert list((tmp_path / "numba").rglob("*.nbi")), "nothing was compiled into the empty cache"
    table = out.split("Where the jobs run now (hctl gpus)", 1)[1].split("All jobs finished", 1)[0]
    rows = [line.split() for line in table.splitlines() if line.startswith("worker-")]
    assert len(rows) == 8, table
    assert any("," in row[-1] for row in rows), table  # a GPU with two or more jobs
    assert "no GPU shared" not in out and "without sharing" not in out
    assert re.search(r"All jobs finished in \d+ s", out)
