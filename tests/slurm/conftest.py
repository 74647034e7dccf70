from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import LocalCluster
from tests.slurm.devslurm import DevSlurm


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSlurm]:
    s = DevSlurm(tmp_path_factory.mktemp("slurm"))
    s.start()
    try:
        yield s
    finally:
        ids = s.active()
        if ids:
            s.run("scancel", *ids, check=False)
        s.stop()


@pytest.fixture(scope="module")
def master(slurm: DevSlurm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(pathlib.Path(tmp_path_factory.mktemp("master")))
    c.start_master()
    try:
        yield c
    finally:
        c.stop()
