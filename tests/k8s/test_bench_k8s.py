"""bench/k8s.py still runs end to end at tiny sizes on a real control plane (figures are not
judged here: its note and docs carry them): every phase binds the pods that fit, the sharing
phase packs more than one pod on a GPU, and the ratio line compares the two schedulers."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.benchrun import bench
from tests.k8s.nodeplane import REQUIRE_ENV, SCRIPT


def test_the_k8s_bench_binds_with_both_schedulers_and_packs_when_sharing() -> None:
    found = subprocess.run(["bash", str(SCRIPT), "bin", "--no-build"], capture_output=True, text=True)
    if found.returncode != 0 or shutil.which("etcd") is None:
        why = f"no control plane: {found.stderr.strip() or 'no etcd on PATH'}"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"${REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    lines = bench("k8s.py", "--nodes", "3", "--gpus", "2", "--pods", "8", "--settle-s", "4")
    rows = {x["scheduler"]: x for x in lines if "scheduler" in x}
    assert set(rows) == {"kube-scheduler", "horus-k8s", "horus-k8s sharing"}
    assert rows["kube-scheduler"]["bound"] == 6 and rows["horus-k8s"]["bound"] == 6  # 6 GPUs, exclusive
    assert rows["horus-k8s"]["pods_per_gpu"] == 1.0
    assert rows["horus-k8s sharing"]["bound"] == 8 and rows["horus-k8s sharing"]["pods_per_gpu"] > 1.0
    for r in rows.values():
        assert r["pods_per_s"] > 0 and 0 < r["p50_s"] <= r["p99_s"]
    (ratio,) = [x for x in lines if x.get("ratio")]
    assert ratio["ratio"] == "horus/kube-scheduler" and ratio["pods_per_s"] > 0
