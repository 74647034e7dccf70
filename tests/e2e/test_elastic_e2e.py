"""A live elastic job: starts on 2 GPUs of a busy 8-GPU node, grows to 8 once the other jobs end
(the optimus policy resizes it by stopping it and starting it again), resumes from its own
checkpoint at every start, and never runs two attempts at once."""

from __future__ import annotations

import itertools
import pathlib
import re
import sys

import pytest

from horus_core import SyncHorusClient
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, until, workload_cmd

pytestmark = pytest.mark.timeout(240)
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"
RUN = re.compile(r"^(start|stop|done) attempt=(\d+) gpus=(\d+) step=(\d+) at=([0-9.]+)$")


def runs(folder: pathlib.Path) -> list[tuple[str, int, int, int, float]]:
    lines = (folder / "runs.log").read_text().splitlines() if (folder / "runs.log").exists() else []
    out = []
    for line in lines:
        m = RUN.match(line)
        assert m is not None, line
        out.append((m[1], int(m[2]), int(m[3]), int(m[4]), float(m[5])))
    return out


def test_elastic_job_grows_from_2_to_8_gpus_resuming_each_time(
    tmp_path: pathlib.Path, cluster: LocalCluster
) -> None:
    cluster.policy = "optimus"
    cluster.start_master("--optimus-replan-s", "1")
    cluster.start_worker("w1", "8")
    cluster.wait_nodes(1)
    ckpt = tmp_path / "ckpt"
    with SyncHorusClient.connect(cluster.addr) as client:
        blockers = [
            client.submit(JobSpec(tuple(workload_cmd(6.0)), gpus=3, exclusive=True, name=f"busy-{i}"))
            for i in range(2)
        ]
        until(lambda: all(client.get(b.id).state is JobState.RUNNING for b in blockers))
        jid = cluster.hctl(
            "submit", "--gpus", "2:8", "--total-steps", "300", "--exclusive", "--name", "elastic",
            "--", sys.executable, str(EXAMPLE), "--checkpoint-dir", str(ckpt), "--steps", "300",
            "--step-s", "0.2", "--checkpoint-every", "10",
        ).stdout.strip()  # fmt: skip
        first = until(lambda: (j := client.get(jid)).state is JobState.RUNNING and j)
        assert len(first.gpus) == 2  # the other 6 GPUs are busy
        shown = {r["id"]: r for r in cluster.hctl_json("jobs")}[jid]
        assert (shown["gpus_min"], shown["gpus_max"]) == (2, 8)
        assert "2 (2:8)" in cluster.hctl("jobs").stdout

        grown = until(lambda: (j := client.get(jid)).state is JobState.RUNNING and len(j.gpus) == 8 and j, 90)
        assert grown.attempt >= 2
        progress = until(
            lambda: (p := client.progress(jid)).latest and p.latest.attempt == grown.attempt and p
        )
        assert progress.estimate_from == "total_steps" and progress.steps_left is not None
        done = client.wait(jid, timeout=120, poll_interval=0.5)
        assert done.state is JobState.SUCCEEDED, done.reason
        logs = [b"".join(client.logs(jid, attempt=a)).decode() for a in range(1, done.attempt + 1)]

    assert "starting at step 0" in logs[0] and "world size 2" in logs[0]
    resumed = [int(m[1]) for log in logs[1:] for m in [re.search(r"resumed from step (\d+)", log)] if m]
    assert len(resumed) == len(logs) - 1 and all(s > 0 for s in resumed), logs
    assert "world size 8" in logs[-1] and "finished at step 300" in logs[-1]
    events = runs(ckpt)
    starts = [e for e in events if e[0] == "start"]
    assert next(e[2] for e in starts) == 2 and starts[-1][2] == 8
    # Never two attempts at once: every run ended before the next one started.
    for prev, nxt in itertools.pairwise(events):
        assert (prev[0] == "start") != (nxt[0] == "start"), events
        if nxt[0] == "start":
            assert prev[4] <= nxt[4] and prev[1] < nxt[1], events
    assert events[-1][0] == "done" and events[-1][3] == 300
    text = cluster.hctl("job", jid).stdout
    assert "2:8 GPU(s), elastic" in text and "Progress" in text and "step 300" in text
