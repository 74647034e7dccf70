"""Injected faults for simulated GPUs (``--fake-gpu-faults``): lines read as they are appended,
Xids reported once, ECC counts kept, bad lines skipped; and the simulated probe's readings."""

from __future__ import annotations

import pathlib

from horus_core.interference import default_model
from worker.gpu.faults import FaultFile, GpuFaults
from worker.gpu.simulated import SimulatedProbe, parse_fake_gpus, simulated_gpus


def test_lines_are_taken_once_as_they_are_appended(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "faults"
    faults = FaultFile(path)
    assert faults.take() == {}  # no file yet
    path.write_text("0 xid 79\n1 ecc 2\nnonsense\n0 xid 48\n1 ec")  # the last line is not finished
    assert faults.take() == {0: GpuFaults(0, (79, 48)), 1: GpuFaults(2, ())}
    assert faults.take() == {1: GpuFaults(2, ())}  # Xids once; the ECC count stays
    with path.open("a") as f:
        f.write("c 5\n")
    assert faults.take() == {1: GpuFaults(5, ())}


def test_simulated_probe_reports_the_injected_faults(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "faults"
    path.write_text("1 xid 79\n1 ecc 3\n")
    gpus = simulated_gpus("n1", parse_fake_gpus("2"))
    probe = SimulatedProbe(gpus, default_model(), faults=FaultFile(path), seed=1)
    first = probe.read_now([])[0]
    assert [(r.ecc_errors, r.xid_events) for r in first] == [(0, ()), (3, (79,))]
    again = probe.read_now([])[0]
    assert [(r.ecc_errors, r.xid_events) for r in again] == [(0, ()), (3, ())]
