"""The example policy of docs/adding-a-policy.md (examples/fewest_gpus_policy.py), loaded with
``--policy-module``: it runs through ``horus-sim`` (a real subprocess) and a live master (real
gRPC on port 0, a real SQLite file, a fake worker), and serves the fewest GPUs first there."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import Assign, ClusterSnapshot
from horus_core.policies import load_policy_module, make_policy, policy_names
from horus_core.testing import FakeClock, nodes, pending
from master.main import parse_args

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fewest_gpus_policy.py"
SIM = pathlib.Path(sys.executable).parent / "horus-sim"
TRACE = REPO / "horus_core" / "data" / "traces" / "physical_small_test.trace"


def test_the_example_serves_the_fewest_gpus_first() -> None:
    assert load_policy_module(str(EXAMPLE)) in (["fewest-gpus"], [])  # (loaded once per process)
    snap = ClusterSnapshot(nodes(1, 2), (pending("big", gpus=2, exclusive=True), pending("small", at=1.0)))
    (placed,) = [a for a in make_policy("fewest-gpus").decide(snap, 10.0) if isinstance(a, Assign)]
    assert placed.job_id == "small"
    (first,) = [a for a in make_policy("horus").decide(snap, 10.0) if isinstance(a, Assign)]
    assert first.job_id == "big"  # (arrival order, as horus serves two jobs of no service)


@pytest.mark.skipif(not SIM.exists(), reason="horus-sim is not installed in this environment")
def test_the_example_runs_through_horus_sim() -> None:
    args = ["--trace", TRACE, "--cluster", "v100:8", "--policies", "fewest-gpus,horus", "--json"]
    proc = subprocess.run(
        [str(SIM), "--policy-module", str(EXAMPLE), *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert set(metrics) == {"fewest-gpus", "horus"} and metrics["fewest-gpus"]["unfinished"] == 0
    bad = subprocess.run([str(SIM), "--policy-module", "no/such.py", *map(str, args)], capture_output=True,
                         text=True, timeout=300, cwd=REPO, check=False)  # fmt: skip
    assert bad.returncode == 2 and "no Python file at 'no/such.py'" in bad.stderr


def test_the_master_takes_a_policy_module_on_its_command_line(tmp_path: pathlib.Path) -> None:
    args = parse_args(
        ["--db", str(tmp_path / "h.db"), "--policy-module", str(EXAMPLE), "--policy", "fewest-gpus"]
    )
    assert args.policy == "fewest-gpus" and "fewest-gpus" in policy_names()
    with pytest.raises(SystemExit):
        parse_args(["--db", str(tmp_path / "h.db"), "--policy-module", str(tmp_path / "none.py")])


async def test_the_example_runs_in_a_live_master(tmp_path: pathlib.Path) -> None:
    load_policy_module(str(EXAMPLE))
    async with running_master(tmp_path, FakeClock(), policy="fewest-gpus") as m, client_for(m) as stub:
        big = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2, exclusive=True)))).job.id
        small = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=1, exclusive=True)))).job.id
        w = FakeWorker(m.port, "node-a", n_gpus=2)  # (no node before: both jobs wait for the first pass)
        await w.connect()
        await m.scheduler.run_once()
        assert (await w.recv_kind("assign")).job_id == small
        got: pb.Job = await stub.GetJob(cpb.GetJobRequest(job_id=big))
        assert got.state == pb.JOB_STATE_PENDING
