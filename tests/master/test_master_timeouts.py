"""Unsafe timeout pairs are refused (issue 15 #8): node_timeout >= lease + kill grace + margin."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from master.config import LEASE_MARGIN_S, MasterConfig, timeout_problem


def cfg(**kw: float | None) -> MasterConfig:
    return MasterConfig(pathlib.Path("unused.db"), **kw)  # type: ignore[arg-type]


def test_the_issue_pair_is_refused_with_the_inequality_in_the_message() -> None:
    with pytest.raises(ValueError) as err:
        cfg(lease_s=5.0, node_timeout_s=5.5)
    assert "--node-timeout-s 5.5 must be at least --lease-s (5)" in str(err.value)


@pytest.mark.parametrize(
    ("lease", "grace", "node_timeout", "ok"),
    [
        (20.0, None, 30.0, True),  # the defaults: grace derived as 5
        (20.0, 9.0, 30.0, True),  # 20 + 9 + 1 = 30
        (20.0, 9.5, 30.0, False),
        (8.0, None, 12.0, True),  # the e2e harness: grace derived as 3
        (1.5, None, 3.0, True),  # the fault suite: grace derived as 0.5
        (3.0, None, 3.5, False),  # no room for any grace
        (30.0, None, 30.0, False),
    ],
)
def test_node_timeout_must_cover_lease_grace_and_margin(
    lease: float, grace: float | None, node_timeout: float, ok: bool
) -> None:
    problem = timeout_problem(1.0, 0.5, lease, node_timeout, grace)
    assert (problem is None) is ok, problem
    if ok:
        c = cfg(lease_s=lease, node_timeout_s=node_timeout, heartbeat_s=0.5, kill_grace_s=grace)
        assert c.node_timeout_s >= c.lease_s + c.kill_grace + LEASE_MARGIN_S
        assert c.kill_grace > 0


@pytest.mark.parametrize(
    "bad",
    [
        {"heartbeat_s": 20.0},  # not shorter than the lease
        {"lease_s": float("nan")},
        {"node_timeout_s": float("inf")},
        {"kill_grace_s": 0.0},
        {"tick_s": -1.0},
    ],
)
def test_other_bad_timeouts_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        cfg(**bad)


def test_the_cli_refuses_the_issue_pair_before_creating_anything(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "x.db"
    cli = [sys.executable, "-m", "master.main", "--db", str(db), "--lease-s", "5", "--node-timeout-s", "5.5"]
    out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unsafe timeouts" in out.stderr and "Traceback" not in out.stderr
    assert not db.exists()
