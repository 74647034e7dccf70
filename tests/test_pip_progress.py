"""``make``'s installs show progress (issue 39: 40-100 s of silence): scripts/pip_progress.py turns
pip's log into a line per step, says it still works while pip is quiet, and keeps pip's exit
status, showing pip's last lines when it fails (a real pip run)."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pip_progress.py"
_spec = importlib.util.spec_from_file_location("pip_progress", SCRIPT)
assert _spec is not None and _spec.loader is not None
pip_progress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pip_progress)


def test_a_line_per_step_and_nothing_for_the_rest() -> None:
    step = pip_progress.step
    assert step("Collecting numba>=0.60\n") == "  collecting numba>=0.60"
    assert (
        step("  Downloading torch-2.13.0-cp311-none-any.whl (187.3 MB)") == "  downloading torch (187.3 MB)"
    )
    assert step("  Building editable for horus (pyproject.toml): started") == "  building horus"
    assert step("  Building editable for horus (pyproject.toml): finished with status 'done'") is None
    many = "Installing collected packages: " + ", ".join(f"p{i}" for i in range(30))
    assert step(many) == "  installing 30 packages: p0 p1 p2 p3 p4 p5 ..."
    assert step("Requirement already satisfied: numpy in ./.venv") is None
    assert (
        step("ERROR: No matching distribution found for x") == "ERROR: No matching distribution found for x"
    )
    assert (
        pip_progress.still(47.2, "  collecting scipy")
        == "  ... still installing after 47 s (collecting scipy)"
    )


def test_a_failed_install_keeps_pips_status_and_shows_its_last_lines() -> None:
    argv = [sys.executable, str(SCRIPT), "--no-index", "horus-no-such-package-xyz"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "ERROR: Could not find a version that satisfies the requirement horus-no-such-package-xyz"
        in done.stdout
    )
    assert "pip failed (exit 1); its last lines:" in done.stderr
