"""A multi-node gang live: 2 workers x 4 simulated GPUs, one job of 8 GPUs across both; each
part sees its rank; killing one worker stops the other part and re-queues the job exactly once."""

from __future__ import annotations

import os
import pathlib
import signal
import sys
from typing import Any

import pytest

from tests.e2e.cluster import LocalCluster, until

pytestmark = pytest.mark.timeout(240)

KEYS = (
    "HORUS_JOB_ID",
    "HORUS_ATTEMPT",
    "NODE_RANK",
    "NNODES",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_NPROC_PER_NODE",
)

# Prints its env and notes its start in a shared file; attempt 1 then runs long, attempt 2 meets
# its other part at MASTER_ADDR:MASTER_PORT (rank 0 listens, rank 1 connects) and exits 0 only if
# they exchanged their ranks: the env is enough for a rendezvous.
PART = """
import os, socket, sys, time
env = os.environ
print(" ".join(f"{k}={env.get(k, '')}" for k in sys.argv[2:]), flush=True)
with open(sys.argv[1], "a") as f:
    f.write(f"{env['HORUS_ATTEMPT']} {env['NODE_RANK']} {os.getpid()}\\n")
if env["HORUS_ATTEMPT"] == "1":
    time.sleep(600)
addr = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
if env["NODE_RANK"] == "0":
    with socket.create_server(addr) as srv:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"rank 0")
            print("rank 0 met", conn.recv(64).decode(), flush=True)
else:
    for _ in range(100):
        try:
            conn = socket.create_connection(addr, timeout=5)
            break
        except OSError:
            time.sleep(0.2)
    with conn:
        conn.sendall(b"rank " + env["NODE_RANK"].encode())
        print("rank 1 met", conn.recv(64).decode(), flush=True)
"""


def _env_lines(text: str) -> dict[str, dict[str, str]]:
    """``[node] K=V ...`` lines -> node -> env."""
    out = {}
    for line in text.splitlines():
        if line.startswith("[") and "HORUS_JOB_ID=" in line:
            node, _, rest = line[1:].partition("] ")
            out[node] = dict(kv.split("=", 1) for kv in rest.split())
    return out


def _starts(marks: pathlib.Path) -> list[tuple[str, str, int]]:
    if not marks.exists():
        return []
    return [(a, r, int(p)) for a, r, p in (line.split() for line in marks.read_text().splitlines())]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_gang_runs_across_two_workers_and_is_requeued_once_when_one_is_killed(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    cluster.start_master()
    cluster.start_worker("w1")
    cluster.start_worker("w2")
    cluster.wait_nodes(2)
    marks = tmp_path / "starts.txt"
    jid = cluster.hctl(
        "submit", "--gpus", "8", "--", sys.executable, "-c", PART, str(marks), *KEYS
    ).stdout.strip()

    job: dict[str, Any] = until(lambda: (j := cluster.hctl_json("job", jid))["state"] == "RUNNING" and j)
    assert job["attempt"] == 1 and [n["name"] for n in job["nodes"]] == [
        job["node"],
        *({"w1", "w2"} - {job["node"]}),
    ]
    assert all(len(n["gpus"]) == 4 for n in job["nodes"]) and len(set(job["gpus"])) == 8
    rank0, rank1 = (n["name"] for n in job["nodes"])

    envs = until(lambda: len(e := _env_lines(cluster.hctl("logs", jid).stdout)) == 2 and e)
    for rank, node in enumerate((rank0, rank1)):
        env = envs[node]
        assert (env["NODE_RANK"], env["PET_NODE_RANK"], env["NNODES"], env["PET_NNODES"]) == (
            str(rank),
            str(rank),
            "2",
            "2",
        )
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["PET_NPROC_PER_NODE"]) == ("8", "4", "4")
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"  # the peer the master saw
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == envs[rank0]["MASTER_PORT"]
        assert env["HORUS_JOB_ID"] == jid and env["HORUS_ATTEMPT"] == "1"
    one = cluster.hctl("logs", jid, "--node", rank1).stdout
    assert "NODE_RANK=1" in one and "NODE_RANK=0" not in one and not one.startswith("[")

    # Kill rank 1's worker: the master loses the node, stops rank 0's part and re-queues once.
    survivor = next(pid for a, r, pid in _starts(marks) if (a, r) == ("1", "0"))
    cluster.workers[rank1].send_signal(signal.SIGKILL)
    cluster.workers[rank1].wait(timeout=10)
    pending = until(lambda: (j := cluster.hctl_json("job", jid))["state"] == "PENDING" and j, timeout=60)
    assert pending["attempt"] == 1, pending  # (its reason is soon the wait reason: 8 GPUs needed)
    until(lambda: not _alive(survivor), timeout=30)

    # Back with both nodes: attempt 2 runs on both and succeeds; attempt 1 never ran again.
    cluster.start_worker(rank1)
    done = until(lambda: (j := cluster.hctl_json("job", jid))["state"] == "SUCCEEDED" and j, timeout=90)
    assert done["attempt"] == 2 and len(done["nodes"]) == 2, done
    starts = sorted((a, r) for a, r, _ in _starts(marks))
    assert starts == [("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")], starts
    text2 = cluster.hctl("logs", jid, "--attempt", "2").stdout
    assert {e["NODE_RANK"] for e in _env_lines(text2).values()} == {"0", "1"}
    assert f"[{done['nodes'][0]['name']}] rank 0 met rank 1" in text2, text2
    assert f"[{done['nodes'][1]['name']}] rank 1 met rank 0" in text2, text2
