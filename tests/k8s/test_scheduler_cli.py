"""``horus-k8s``'s command line: bad flags and files exit 2 with one line naming them, before any
apiserver is dialled; ``--db`` opens Horus's store (its learned speeds reach the model)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from master.k8s.main import _learned
from master.store import Store
from master.store.learned import PairMeasurement, RecordRatesOp
from tests.k8s.schedplane import ENV

CLI = [sys.executable, "-m", "master.k8s.main"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--tick", "0"], "tick: must be more than 0"),
        (["--queues", "/no/such.toml"], "/no/such.toml"),
        (["--kubeconfig", "/no/such/kubeconfig"], "--kubeconfig /no/such/kubeconfig"),
    ],
)
def test_bad_flags_exit_2_naming_them(args: list[str], says: str) -> None:
    got = subprocess.run([*CLI, *args], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert got.returncode == 2 and says in got.stderr
    assert got.stderr.count("\n") == 1, got.stderr


async def test_db_opens_the_store_and_loads_what_it_learned(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "horus.db"
    r18, r50 = "ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)"
    async with _learned("") as (packaged, _):
        before = packaged.pair_speeds(r18, r50, "v100")[0]
    store = await Store.open(db)  # what a master (or an earlier run) learned: a measured pair
    try:
        for _ in range(8):
            await store.write(RecordRatesOp(r18, "v100", 1, 100.0, (PairMeasurement(r50, 11.0, 100.0),), 0.0))
    finally:
        await store.close()
    async with _learned(str(db)) as (model, _):
        after = model.pair_speeds(r18, r50, "v100")[0]
    assert after < before - 0.05, (before, after)
