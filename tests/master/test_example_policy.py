"""The example policies of docs/adding-a-policy.md (``examples/``: a queue order, a placement
rule, a preemption rule), loaded with ``--policy-module``: each runs through ``horus-sim`` (a
real subprocess) and a live master (real gRPC on port 0, a real SQLite file, fake workers), and
does there what it says."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from dataclasses import replace

import pytest
from master_fakes import FakeWorker, client_for, running_master, spec

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.model import Assign, ClusterSnapshot, JobState, Preempt, Wait
from horus_core.policies import load_policy_module, make_policy, policy_names
from horus_core.testing import FakeClock, nodes, pending
from master.main import parse_args

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fewest_gpus_policy.py"
WORST_FIT = REPO / "examples" / "worst_fit_policy.py"
PREEMPT = REPO / "examples" / "priority_preempt_policy.py"
EXAMPLES = {"fewest-gpus": EXAMPLE, "worst-fit": WORST_FIT, "priority-preempt": PREEMPT}
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
    names = [*EXAMPLES, "horus"]
    args = ["--trace", TRACE, "--cluster", "v100:8", "--policies", ",".join(names), "--json"]
    modules = [arg for path in EXAMPLES.values() for arg in ("--policy-module", str(path))]
    proc = subprocess.run([str(SIM), *modules, *map(str, args)], capture_output=True, text=True, timeout=300,
                          cwd=REPO, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads(proc.stdout)
    assert set(metrics) == set(names)
    assert all(metrics[name]["unfinished"] == 0 for name in EXAMPLES), metrics
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


def test_worst_fit_spreads_and_priority_preempt_preempts() -> None:
    assert load_policy_module(str(WORST_FIT)) in (["worst-fit"], [])
    assert load_policy_module(str(PREEMPT)) in (["priority-preempt"], [])
    snap = ClusterSnapshot(nodes(2, 4), (pending("a"), pending("b", at=1.0)))
    spread = {a.node for a in make_policy("worst-fit").decide(snap, 10.0) if isinstance(a, Assign)}
    packed = {a.node for a in make_policy("fifo").decide(snap, 10.0) if isinstance(a, Assign)}
    assert spread == {"n0", "n1"} and packed == {"n0"}
    held = tuple(f"n0g{k}" for k in range(4))
    low = replace(
        pending("low", gpus=4), state=JobState.RUNNING, node="n0", gpus=held, attempt=1, started_at=1.0
    )
    high = pending("high", at=5.0, gpus=2)
    high = replace(high, spec=replace(high.spec, priority=5))
    acts = make_policy("priority-preempt").decide(ClusterSnapshot(nodes(1, 4), (low, high)), 10.0)
    assert [type(a) for a in acts] == [Preempt, Wait] and acts[0].job_id == "low"
    same = replace(high, spec=replace(high.spec, priority=0))  # (no lower priority: nothing preempted)
    assert not any(isinstance(a, Preempt) for a in make_policy("priority-preempt").decide(
        ClusterSnapshot(nodes(1, 4), (low, same)), 10.0))  # fmt: skip


async def test_worst_fit_runs_in_a_live_master(tmp_path: pathlib.Path) -> None:
    load_policy_module(str(WORST_FIT))
    async with running_master(tmp_path, FakeClock(), policy="worst-fit") as m, client_for(m) as stub:
        workers = [FakeWorker(m.port, f"node-{k}", n_gpus=2) for k in "ab"]
        for w in workers:
            await w.connect()
        for _ in range(2):
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=1)))
        await m.scheduler.run_once()
        for w in workers:  # one job on each node (fifo's best fit puts both on one)
            assert (await w.recv_kind("assign")).gpus[0].startswith(f"GPU-{w.name}-")


async def test_priority_preempt_runs_in_a_live_master(tmp_path: pathlib.Path) -> None:
    load_policy_module(str(PREEMPT))
    async with running_master(tmp_path, FakeClock(), policy="priority-preempt") as m, client_for(m) as stub:
        w = FakeWorker(m.port, "node-a", n_gpus=2)
        await w.connect()
        low = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2)))).job.id
        await m.scheduler.run_once()
        await w.run_next()
        await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(gpus=2, priority=5)))
        await m.scheduler.run_once()
        assert (await w.recv_kind("kill")).job_id == low


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
