"""Addresses as people write them (issue 39): one parser (horus_core.address) behind hctl, the SDK,
the worker and the master, with the documented default port 50051; what is wrong is named. The
daemons' and hctl's own command lines are run for real (argparse, and subprocesses for the exits);
nothing here dials port 50051 (another master may listen there on a shared machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from horus_core import HorusClient
from horus_core.address import DEFAULT_PORT, split_addresses, with_port
from master.main import parse_args as master_args
from worker.main import parse_args as worker_args


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("localhost", "localhost:50051"),
        (" 127.0.0.1 ", "127.0.0.1:50051"),
        ("10.0.0.7:6000", "10.0.0.7:6000"),
        ("::1", "[::1]:50051"),
        ("[::1]", "[::1]:50051"),
        ("[fe80::1%eth0]:7", "[fe80::1%eth0]:7"),
        ("dns:///master.example:443", "dns:///master.example:443"),  # a gRPC URI, as it is
        ("unix:/run/horus.sock", "unix:/run/horus.sock"),
    ],
)
def test_an_address_gets_the_default_port_where_it_names_none(text: str, address: str) -> None:
    assert DEFAULT_PORT == 50051
    assert with_port(text) == address


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "an empty address"),
        ("h:", "no port after ':'"),
        (":50051", "no host in ':50051'"),
        ("h:http", "port 'http' of 'h:http' is not a number within 1-65535"),
        ("h:70000", "not a number within 1-65535"),
        ("h:0", "not a number within 1-65535"),  # (a client cannot dial port 0)
        ("bad host:1", "'bad host' is not a host name or address"),
        ("[::1", "is not an address"),
    ],
)
def test_a_bad_address_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        with_port(text)


def test_lists_ports_to_listen_on_and_ports_required() -> None:
    assert split_addresses("a, b:2,a") == ("a:50051", "b:2")
    assert with_port("0.0.0.0:0", allow_zero=True) == "0.0.0.0:0"
    with pytest.raises(ValueError, match="no port in 'h'"):
        with_port("h", None)


async def test_the_sdk_and_the_daemons_take_an_address_without_a_port() -> None:
    async with HorusClient.connect("localhost") as one, HorusClient.connect("a,b:7") as two:
        assert one.target == "localhost:50051"  # (lazy: nothing is sent)
        assert two.masters == ("a:50051", "b:7")
    assert worker_args(["--master", "127.0.0.1", "--fake-gpus", "1"]).master == "127.0.0.1:50051"
    assert worker_args(["--master", "a, b:7", "--fake-gpus", "1"]).master == "a:50051,b:7"
    args = master_args(["--listen", "0.0.0.0", "--db", "x.db", "--advertise", "m1.example"])
    assert (args.listen, args.advertise) == ("0.0.0.0:50051", "m1.example:50051")
    args = master_args(["--listen", "127.0.0.1:6000", "--db", "x.db", "--advertise", "m1"])
    assert args.advertise == "m1:6000"  # (the port it listens on)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)


def test_bad_addresses_exit_2_naming_the_flag() -> None:
    done = run("horus_core.cli", "--master", "h:x", "jobs")
    assert done.returncode == 2 and "--master (or $HORUS_MASTER): port 'x' of 'h:x'" in done.stderr
    done = run("worker.main", "--master", "127.0.0.1:", "--fake-gpus", "1")
    assert done.returncode == 2 and "--master: no port after ':' in '127.0.0.1:'" in done.stderr
    assert "is required" not in done.stderr
    done = run("master.main", "--listen", "127.0.0.1:0", "--db", "x.db", "--http-listen", "127.0.0.1")
    assert done.returncode == 2 and "--http-listen: no port in '127.0.0.1'" in done.stderr
