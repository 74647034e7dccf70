"""A PostgreSQL restart while attempts end (issue 39 defect 1): a worker's final update whose
write fails while the server is down is not lost. The master resets the worker's stream, the
worker registers again with its finals, and every ended job reaches SUCCEEDED within seconds of
the server coming back. Real processes: a private PostgreSQL (stopped and started with pg_ctl),
``horus-master`` on it, ``horus-worker`` with simulated GPUs."""

from __future__ import annotations

import pathlib
import time

from horus_core.client import SyncHorusClient
from horus_core.errors import HorusError
from horus_core.model import JobSpec, JobState
from tests.e2e.cluster import LocalCluster, until
from tests.failover.harness import PrivatePostgres, require_postgres

JOBS, JOB_S, DOWN_S = 4, 1.0, 3.0
BACK_WITHIN_S = 10.0  # the worker's reconnect backoff tops out at 5 s


def states(c: SyncHorusClient, ids: list[str]) -> list[JobState] | None:
    try:
        return [c.get(i).state for i in ids]
    except HorusError:  # (the master's reads reconnecting)
        return None


def test_finals_sent_while_the_store_restarts_land_once_it_is_back(tmp_path: pathlib.Path) -> None:
    require_postgres()
    pg = PrivatePostgres()
    cluster = LocalCluster(tmp_path)
    try:
        url = pg.start()
        cluster.start_master("--db", url, "--data-dir", str(tmp_path / "m"), "--log-level", "INFO")
        cluster.start_worker("w1", str(JOBS), "--state-dir", str(tmp_path / "w1"))
        cluster.wait_nodes(1)
        with SyncHorusClient(cluster.addr, timeout=5) as c:
            spec = JobSpec(command=("sleep", str(JOB_S)), gpus=1)
            ids = [c.submit(spec).id for _ in range(JOBS)]
            until(lambda: states(c, ids) == [JobState.RUNNING] * JOBS, 30)
            pg.stop()  # the attempts end while the server is down: their finals' writes fail
            time.sleep(DOWN_S)
            pg.start()
            back = time.monotonic()
            until(lambda: states(c, ids) == [JobState.SUCCEEDED] * JOBS, 30)
            took = time.monotonic() - back
        assert took < BACK_WITHIN_S, f"{took:.1f} s after the store came back"
    finally:
        cluster.stop()
        pg.remove()
