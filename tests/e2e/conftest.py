from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()
