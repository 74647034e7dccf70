"""``horus-sim --min-speed`` (issue 10): a floor of 0.8 leaves no job running below 0.8x of solo
on a trace where ``horus`` alone slows some, and a bad floor is refused (exit 2)."""

from __future__ import annotations

import json

from test_sim_cli import TRACE, horus_sim, pytestmark  # noqa: F401  (skip where not installed)


def run(*extra: str) -> dict[str, float]:
    proc = horus_sim(
        "--trace", TRACE, "--cluster", "v100:4", "--policies", "horus", "--json", "--no-plots", *extra
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, float] = json.loads(proc.stdout)["horus"]
    return out


def test_a_floor_of_0_8_leaves_no_job_below_0_8x() -> None:
    free, floored = run(), run("--min-speed", "0.8")
    assert free["slow_any_share"] > 0.0  # without the floor some jobs run below 0.8x
    assert floored["slow_any_share"] == 0.0 and floored["unfinished"] == 0


def test_a_floor_outside_0_1_is_refused() -> None:
    proc = horus_sim("--trace", TRACE, "--cluster", "v100:4", "--min-speed", "1.5")
    assert proc.returncode == 2 and "min_speed" in proc.stderr
