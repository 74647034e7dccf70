"""``horus-worker --rack``: checked at startup, carried by the registration message (issue 11)."""

from __future__ import annotations

import pathlib

import pytest

from worker import messages
from worker.agent import AgentConfig
from worker.main import parse_args


def test_rack_flag_is_parsed_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--master", "m:1", "--name", "n1", "--rack", "rack-2"]).rack == "rack-2"
    assert parse_args(["--master", "m:1", "--name", "n1"]).rack == ""
    with pytest.raises(SystemExit):
        parse_args(["--master", "m:1", "--name", "n1", "--rack", "bad rack"])
    assert "--rack must be" in capsys.readouterr().err


def test_registration_carries_the_rack(tmp_path: pathlib.Path) -> None:
    msg = messages.register("n1", [], [], "", rack="rack-2")
    assert msg.register.rack == "rack-2" and msg.register.name == "n1"
    assert AgentConfig("n1", "m:1", tmp_path, rack="r").rack == "r"
