"""The speed floor ``min_speed`` (issue 10) end to end through the interfaces: validation, the
wire both ways, job files, the stored row, ``hctl submit --min-speed`` and ``hctl job``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest
from test_client_fake import FakeMaster, ThreadedFakeMaster

from horus_core import jobfile, wire
from horus_core.cli.main import main
from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from horus_core.validation import validate_spec
from master.store.rows import spec_from_dict, spec_to_json


@pytest.fixture
def server() -> Iterator[ThreadedFakeMaster]:
    with ThreadedFakeMaster(FakeMaster()).running() as srv:
        yield srv


@pytest.mark.parametrize("bad", [-0.1, 1.01, math.nan, math.inf])
def test_a_floor_outside_0_1_or_not_finite_is_refused(bad: float) -> None:
    with pytest.raises(InvalidArgument) as info:
        validate_spec(JobSpec(("x",), min_speed=bad))
    assert info.value.field == "min_speed"


@pytest.mark.parametrize("floor", [0.0, 0.3, 0.8, 1.0])
def test_wire_and_store_round_trip(floor: float) -> None:
    spec = JobSpec(("x",), min_speed=floor)
    assert wire.spec_from_pb(wire.spec_to_pb(spec)) == spec
    assert spec_from_dict(json.loads(spec_to_json(spec))) == spec


def test_a_row_stored_before_the_field_reads_the_default() -> None:
    doc = json.loads(spec_to_json(JobSpec(("x",), min_speed=0.7)))
    del doc["min_speed"]
    assert spec_from_dict(doc).min_speed == 0.0


def test_job_file_round_trip_and_errors() -> None:
    spec = jobfile.load("run: python train.py\nmin_speed: 0.8\n").spec
    assert spec.min_speed == 0.8
    assert jobfile.load(jobfile.dump(spec)).spec == spec
    assert "min_speed" not in jobfile.to_dict(JobSpec(("x",)))  # the default is left out
    with pytest.raises(InvalidArgument, match="min_speed"):
        jobfile.load("run: x\nmin_speed: fast\n")


def test_hctl_submit_min_speed_reaches_the_master_and_hctl_job_shows_it(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "--master",
                server.address,
                "submit",
                "--gpus",
                "1",
                "--min-speed",
                "0.8",
                "--",
                "python",
                "t.py",
            ]
        )
        == 0
    )
    job_id = capsys.readouterr().out.strip()
    assert server.call(lambda: server.fake.jobs[job_id].spec.min_speed) == 0.8
    assert main(["--master", server.address, "job", job_id]) == 0
    assert "Speed floor" in (out := capsys.readouterr().out) and "0.8x of solo" in out
    assert main(["--master", server.address, "-o", "json", "job", job_id]) == 0
    assert json.loads(capsys.readouterr().out)["min_speed"] == 0.8


def test_hctl_submit_refuses_a_bad_floor_locally(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--master", server.address, "submit", "--gpus", "1", "--min-speed", "2", "--", "x"]) == 2
    assert "min_speed" in capsys.readouterr().err
    assert server.call(lambda: len(server.fake.jobs)) == 0
