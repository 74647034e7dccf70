"""Live Gavel rounds: a ``gavel-las-perf`` master (2.5 s rounds) with a 4xK80 and a 4xV100 worker.

Jobs are a small script that records each attempt's start and end (wall clock, worker name) in
a file and keeps its progress in another, running three times faster on the V100 worker; a
stop takes it a second (a checkpoint), so a next attempt started too early would overlap. The
test checks that a job alone goes to the V100s, that jobs move between GPU types across rounds,
and that no job ever has two attempts running at once.
"""

from __future__ import annotations

import itertools
import pathlib
import sys
from typing import Any

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, until

pytestmark = pytest.mark.timeout(240)
JOB_TYPE = "ResNet-50 (batch size 64)"  # about 3x faster on a V100 than on a K80 in the table

RECORDER = """
import os, signal, sys, time
log, work, total = sys.argv[1], sys.argv[2], float(sys.argv[3])
me = os.environ["HORUS_JOB_ID"] + " " + os.environ["HORUS_ATTEMPT"] + " " + os.environ["HORUS_WORKER"]
speed = 3.0 if "v100" in os.environ["HORUS_WORKER"] else 1.0
def note(what):
    with open(log, "a") as f:
        f.write(f"{what} {me} {time.time():.6f}\\n")
def stop(*_):
    time.sleep(1.0)  # saving a checkpoint: a stop takes a while
    note("end")
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
note("start")
done = float(open(work).read()) if os.path.exists(work) else 0.0
while done < total:
    time.sleep(0.1)
    done += 0.1 * speed
    with open(work + ".tmp", "w") as f:
        f.write(str(done))
    os.replace(work + ".tmp", work)  # a Kill between two writes never leaves a torn file
note("end")
"""


@pytest.fixture
def gavel_cluster(tmp_path: pathlib.Path) -> Any:
    c = LocalCluster(tmp_path, policy="gavel-las-perf")
    try:
        c.start_master("--round-s", "2.5")
        c.start_worker("k80", gpus="4xK80")
        c.start_worker("v100", gpus="4xV100")
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()


def spec(tmp: pathlib.Path, name: str, work_s: float) -> JobSpec:
    script = tmp / "recorder.py"
    if not script.exists():
        script.write_text(RECORDER)
    cmd = (sys.executable, str(script), str(tmp / "attempts.log"), str(tmp / f"{name}.work"), str(work_s))
    return JobSpec(command=cmd, gpus=1, job_type=JOB_TYPE, name=name)


def attempts(log: pathlib.Path) -> dict[str, list[tuple[float, float, str]]]:
    """job id -> [(start, end, worker)] per attempt, from the recorder's lines."""
    starts: dict[tuple[str, str], tuple[float, str]] = {}
    out: dict[str, list[tuple[float, float, str]]] = {}
    for line in log.read_text().splitlines():
        what, job, attempt, worker, at = line.split()
        if what == "start":
            starts[(job, attempt)] = (float(at), worker)
        else:
            begun, where = starts.pop((job, attempt))
            out.setdefault(job, []).append((begun, float(at), where))
    assert not starts, f"attempts that never recorded their end: {starts}"
    return out


def test_gavel_rounds_move_jobs_between_types_never_two_attempts_at_once(
    gavel_cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    c = gavel_cluster
    with SyncHorusClient.connect(c.addr) as client:
        first = client.submit(spec(tmp_path, "first", 6.0))
        running = until(lambda: (j := client.get(first.id)).state is JobState.RUNNING and j)
        assert running.node == "v100", "a job alone goes to the type where it runs faster"
        jobs = [first, *(client.submit(spec(tmp_path, f"job{i}", 15.0)) for i in range(9))]
        finals = [client.wait(j.id, timeout=180) for j in jobs]
    assert all(f.state is JobState.SUCCEEDED for f in finals), [
        (f.spec.name, f.state, f.reason) for f in finals
    ]
    runs = attempts(tmp_path / "attempts.log")
    for job_id, spans in runs.items():
        spans.sort()
        for (_, end, _), (start, _, _) in itertools.pairwise(spans):
            assert end <= start, f"{job_id}: an attempt started before the previous one ended: {spans}"
    moved = [j for j, spans in runs.items() if len({w for _, _, w in spans}) == 2]
    assert moved, f"no job moved between GPU types: {runs}"
    assert any(len(spans) > 1 for spans in runs.values())
