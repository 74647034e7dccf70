"""Racks (issue 11): a worker's --rack reaches the master at registration, is stored with the
node in SQLite, comes back after a master restart, and reaches clients and policies."""

from __future__ import annotations

import argparse
import pathlib

import grpc
import pytest
from master_fakes import FakeWorker, client_for, running_master

from horus_core.cli.cluster import list_nodes
from horus_core.cli.output import Output
from horus_core.client import HorusClient
from horus_core.gen import client_pb2 as cpb
from horus_core.testing import FakeClock


async def test_rack_is_reported_stored_and_shown(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    async with running_master(tmp_path, clock) as master, client_for(master) as stub:
        w = FakeWorker(master.port, "node-a", rack="rack-1")
        await w.connect()
        (node,) = (await stub.ListNodes(cpb.ListNodesRequest())).nodes
        assert node.rack == "rack-1"
        assert [n.rack for n in master.core.registry.all()] == ["rack-1"]
        assert master.core.registry.get("node-a").model().rack == "rack-1"  # what policies see
        await w.close()
    async with running_master(tmp_path, clock) as master, client_for(master) as stub:
        (node,) = (await stub.ListNodes(cpb.ListNodesRequest())).nodes  # loaded from SQLite
        assert node.name == "node-a" and node.rack == "rack-1"


async def test_a_bad_rack_name_is_refused(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    async with running_master(tmp_path, clock) as master, client_for(master) as stub:
        w = FakeWorker(master.port, "node-a", rack="no spaces allowed")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await w.connect()
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "rack" in (err.value.details() or "")
        assert not (await stub.ListNodes(cpb.ListNodesRequest())).nodes
        await w.close()


async def test_hctl_nodes_shows_the_rack(
    tmp_path: pathlib.Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_master(tmp_path, clock) as master:
        w = FakeWorker(master.port, "node-a", rack="rack-7")
        await w.connect()
        async with HorusClient.connect(f"127.0.0.1:{master.port}") as client:
            await list_nodes(client, argparse.Namespace(), Output())
        await w.close()
    out = capsys.readouterr().out
    assert "RACK" in out and "rack-7" in out
