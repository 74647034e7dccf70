"""The fault suite (docs/reliability.md): every fault, once, against real processes on 127.0.0.1.

    pytest tests/faults -q                     # each scenario once, less the long variants (~4 min)
    pytest tests/faults -q -m slow             # the sweep: every scenario HORUS_FAULT_REPEAT times (5)

Each scenario prints one JSON line with its figures (run with ``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.faults.scenario import FAULTS, run

REPEAT = int(os.environ.get("HORUS_FAULT_REPEAT", "5"))
SWEEP_ONLY = {"pause-long", "worker-sigstop-long"}  # longer variants: in the sweep, not the default run


@pytest.mark.parametrize("name", [n for n in FAULTS if n not in SWEEP_ONLY])
def test_fault(tmp_path: pathlib.Path, name: str) -> None:
    print(json.dumps(run(tmp_path, FAULTS[name])))


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(REPEAT))
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_sweep(tmp_path: pathlib.Path, name: str, round_: int) -> None:
    print(json.dumps({**run(tmp_path, FAULTS[name]), "round": round_}))
