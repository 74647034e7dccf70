"""horus-slurm's errors: one line naming what is wrong, and nothing submitted."""

from __future__ import annotations

import subprocess

from tests.e2e.cluster import BIN
from tests.slurm.devslurm import DevSlurm

MASTER = "127.0.0.1:1"  # (never dialled: nothing here gets as far as a pilot)


def fails(slurm: DevSlurm, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = slurm.run(str(BIN / "horus-slurm"), *args, check=False, env=env)
    assert done.returncode != 0, done.stdout
    assert done.stderr.strip(), done
    return done


def test_bad_arguments_are_refused_before_slurm_is_asked(slurm: DevSlurm) -> None:
    before = slurm.active()
    base = ["up", "--master", MASTER]
    cases = {
        ("--gpus-per-node", "0"): "--gpus-per-node must be 1 to 64",
        ("--gpus-per-node", "1", "--time", "1:xx"): "--time",
        ("--gpus-per-node", "1", "--partition", "a b"): "--partition",
        ("--gpus-per-node", "1", "--nodes", "0"): "--nodes",
        ("--gpus-per-node", "1", "--warn-s", "10", "--stop-s", "20"): "--stop-s",
        ("--gpus-per-node", "1", "--adaptive", "--max", "0"): "--max",
    }
    for extra, needle in cases.items():
        done = fails(slurm, *base, *extra)
        assert done.returncode == 2 and needle in done.stderr, (extra, done.stderr)
    assert (
        "--master" in fails(slurm, "up", "--gpus-per-node", "1", env={**slurm.env, "HORUS_MASTER": ""}).stderr
    )
    assert "--all" in fails(slurm, "down").stderr
    assert "not pilots of yours: 999999" in fails(slurm, "down", "999999").stderr
    assert slurm.active() == before


def test_slurm_refusals_show_what_sbatch_said(slurm: DevSlurm) -> None:
    before = slurm.active()
    done = fails(slurm, "up", "--master", MASTER, "--gpus-per-node", "1", "--partition", "nosuch")
    assert (
        done.returncode == 1 and "sbatch failed" in done.stderr and "invalid partition" in done.stderr.lower()
    )
    done = fails(slurm, "up", "--master", MASTER, "--gpus-per-node", "8")  # the node has 4
    assert done.returncode == 1 and "sbatch failed" in done.stderr, done.stderr
    done = fails(slurm, "up", "--master", MASTER, "--gpus-per-node", "1", "--", "--no-such-flag")
    assert done.returncode == 1 and "sbatch failed" in done.stderr and "no-such-flag" in done.stderr
    assert slurm.active() == before


def test_no_slurm_on_path(slurm: DevSlurm) -> None:
    env = {**slurm.env, "PATH": str(BIN)}  # horus-slurm, but no sbatch
    for args in (["status"], ["up", "--master", MASTER, "--gpus-per-node", "1"]):
        done = fails(slurm, *args, env=env)
        assert done.returncode == 1 and "not found on PATH" in done.stderr, done.stderr
