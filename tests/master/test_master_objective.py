"""``horus-master --objective {jct,makespan}``: parsed into the config, refused when unknown,
and a real master serves with the makespan variant of ``horus``."""

from __future__ import annotations

import pathlib

import pytest
from master_fakes import running_master

from horus_core.policies import makespan
from horus_core.policies.pack import PackingPolicy
from master.config import MasterConfig
from master.main import config_from, parse_args


def test_the_objective_is_parsed_and_defaults_to_jct(tmp_path: pathlib.Path) -> None:
    db = ["--db", str(tmp_path / "h.db")]
    assert config_from(parse_args(db)).objective == "jct"
    assert config_from(parse_args([*db, "--objective", "makespan"])).objective == "makespan"


def test_an_unknown_objective_is_refused(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--db", str(tmp_path / "h.db"), "--objective", "fast"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--objective: invalid choice: 'fast'" in err and "'makespan'" in err
    with pytest.raises(ValueError, match="objective must be one of jct, makespan, got 'fast'"):
        MasterConfig(db_path=tmp_path / "h.db", objective="fast")


async def test_a_master_serves_the_makespan_objective(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path, policy="horus", objective="makespan") as m:
        assert isinstance(m.policy, PackingPolicy) and m.policy.config is makespan.HORUS_MAKESPAN
    async with running_master(tmp_path / "b", policy="horus") as m:
        assert isinstance(m.policy, PackingPolicy) and m.policy.config is not makespan.HORUS_MAKESPAN
