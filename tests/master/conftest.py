from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest
from master_fakes import client_for, running_master

from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.testing import FakeClock
from master.app import Master
from tests.pgtest import Db, fresh_database


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def master(tmp_path: pathlib.Path, clock: FakeClock) -> AsyncIterator[Master]:
    async with running_master(tmp_path, clock) as m:
        yield m


@pytest.fixture
async def stub(master: Master) -> AsyncIterator[cgrpc.HorusServiceAsyncStub]:
    async with client_for(master) as s:
        yield s


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> AsyncIterator[Db]:
    """The same test on a SQLite file and on a fresh PostgreSQL database (tests/pgtest.py)."""
    if request.param == "sqlite":
        yield Db("sqlite", str(tmp_path / "horus.db"))
        return
    async with fresh_database() as url:
        yield Db("postgresql", url)
