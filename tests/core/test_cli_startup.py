"""hctl and the SDK start without the scheduler's numerical stack (issue 29, item 13): importing
them in a fresh interpreter loads no numpy, numba, SciPy or scheduler module. The start-up time
itself is measured by bench/cli_startup.py against ``python -c pass``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from horus_core import __version__

HEAVY = ("numpy", "numba", "scipy", "matplotlib", "yaml")
SCHEDULER = ("horus_core.queues", "horus_core.policies", "horus_core.packing", "horus_core.interference",
             "horus_core.sim")  # fmt: skip


def loaded_by(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import horus_core.cli.main; horus_core.cli.main.build_parser()",  # every command and the client
        "from horus_core import HorusClient, SyncHorusClient",
        "import horus_core.client, horus_core.wire",
    ],
)
def test_cli_and_sdk_import_no_numerical_stack(code: str) -> None:
    mods = loaded_by(code)
    assert "grpc" in mods  # the probe really imported the client
    heavy = sorted({m.split(".")[0] for m in mods} & set(HEAVY))
    scheduler = sorted(m for m in mods if m.startswith(SCHEDULER))
    assert heavy == [] and scheduler == [], (heavy, scheduler)


def test_hctl_version_prints_the_version_without_loading_the_client() -> None:
    code = (
        "import sys; from horus_core.cli.main import main; code = main(['--version']);"
        "print(sorted(m for m in ('grpc', 'asyncio', 'horus_core.client') if m in sys.modules));"
        "sys.exit(code)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines() == [f"hctl {__version__}", "[]"], out.stderr
