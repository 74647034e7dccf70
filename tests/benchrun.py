"""Running a benchmark script of bench/ as a test does: a subprocess from the repository root,
its JSON lines parsed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def bench(script: str, *args: str) -> list[dict[str, Any]]:
    """The JSON lines ``bench/<script>`` prints with ``args``; fails the test if it fails."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
