"""Elastic specs at every boundary: hctl --gpus MIN:MAX, job files (V100:2-8), the wire, the store's
JSON, hctl's tables and job view, and the progress part of ``hctl job``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_client_fake import FakeMaster, ThreadedFakeMaster

from horus_core import jobfile, wire
from horus_core.cli.main import main
from horus_core.errors import InvalidArgument
from horus_core.gen import client_pb2 as cpb
from horus_core.gpurange import format_gpus, parse_gpus
from horus_core.model import JobSpec, JobState
from master.store.rows import spec_from_dict, spec_to_json

ELASTIC = JobSpec(("python", "train.py"), gpus=2, gpus_min=2, gpus_max=8, total_steps=300)


@pytest.fixture
def server() -> Iterator[ThreadedFakeMaster]:
    fake = FakeMaster()
    fake.max_gpus = 8
    with ThreadedFakeMaster(fake).running() as srv:
        yield srv


def run(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--master", server.address, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("text", "want"),
    [("4", (4, 0, 0)), ("2:8", (2, 2, 8)), (" 2 - 8 ", (2, 2, 8)), ("3:3", (3, 3, 3))],
)
def test_parse_gpus(text: str, want: tuple[int, int, int]) -> None:
    assert parse_gpus(text) == want


@pytest.mark.parametrize("text", ["", "x", "2:", ":8", "8:2", "2:4:6", "-1", "1.5"])
def test_parse_gpus_refuses_bad_text(text: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        parse_gpus(text)
    assert err.value.field == "gpus"


def test_format_gpus_reads_back() -> None:
    assert format_gpus(ELASTIC) == "2:8" and format_gpus(JobSpec(("x",), gpus=3)) == "3"
    assert parse_gpus(format_gpus(ELASTIC)) == (2, 2, 8)


def test_wire_and_store_keep_the_range() -> None:
    assert wire.spec_from_pb(wire.spec_to_pb(ELASTIC)) == ELASTIC
    assert spec_from_dict(json.loads(spec_to_json(ELASTIC))) == ELASTIC
    old_row = json.loads(spec_to_json(JobSpec(("x",), gpus=2)))
    del old_row["gpus_min"], old_row["gpus_max"]  # a row stored before the fields existed
    assert not spec_from_dict(old_row).elastic


def test_job_file_range_round_trips() -> None:
    spec = jobfile.load("run: python train.py\nresources:\n  accelerators: V100:2-8\n").spec
    assert (spec.gpus, spec.gpus_min, spec.gpus_max, spec.gpu_types) == (2, 2, 8, ("v100",))
    assert jobfile.load(jobfile.dump(spec)).spec == spec
    plain = jobfile.load("run: x\nresources: {accelerators: 2-4}\n").spec
    assert (plain.gpus, plain.gpus_min, plain.gpus_max) == (2, 2, 4)
    assert jobfile.load(jobfile.dump(plain)).spec == plain


@pytest.mark.parametrize("count", ["V100:8-2", "V100:0-4", "V100:2-99"])
def test_job_file_bad_range_names_the_field(count: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        jobfile.load(f"run: x\nresources:\n  accelerators: {count}\n")
    assert "accelerators" in err.value.field or "gpus" in err.value.field


def test_hctl_submit_range_and_the_views(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(server, capsys, "submit", "--gpus", "2:8", "--total-steps", "300", "--", "train")
    assert code == 0, err
    jid = out.strip()
    spec = server.fake.jobs[jid].spec
    assert (spec.gpus, spec.gpus_min, spec.gpus_max, spec.total_steps) == (2, 2, 8, 300)
    queued = next(line for line in run(server, capsys, "queue")[1].splitlines() if jid in line)
    assert "2 (2:8)" in queued
    server.call(
        lambda: server.fake.set_state(jid, JobState.RUNNING, gpus=("g0", "g1", "g2", "g3"), attempt=2)
    )
    row = next(line for line in run(server, capsys, "jobs")[1].splitlines() if jid in line)
    assert "4 (2:8)" in row
    record = json.loads(run(server, capsys, "-o", "json", "jobs")[1])[0]
    assert (record["gpus_min"], record["gpus_max"]) == (2, 8)
    assert "2:8 GPU(s), elastic (starts on 2)" in run(server, capsys, "job", jid)[1]
    code, out, err = run(server, capsys, "get", "job", jid, "-o", "yaml")
    assert code == 0 and "accelerators: 2-8" in out, out + err


def test_hctl_submit_bad_range_exits_2(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(server, capsys, "submit", "--gpus", "8:2", "--", "train")
    assert code == 2 and "gpus" in err and server.fake.jobs == {}


def test_hctl_job_shows_progress_and_estimate(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    jid = server.call(lambda: server.fake.add_job(ELASTIC, JobState.RUNNING)).id
    report = cpb.JobProgressReport(job_id=jid, points=12, estimate_from="loss curve")
    report.latest.CopyFrom(cpb.ProgressPoint(attempt=2, step=1500, loss=0.25, samples_per_s=640.0, at=1.0))
    report.steps_left, report.seconds_left, report.target_step = 8500.0, 3725.0, 10000.0
    report.curve_b0, report.curve_b1, report.curve_b2 = 1e-3, 1.0, 0.1
    server.fake.progress[jid] = report
    out = run(server, capsys, "job", jid)[1]
    assert "step 1500, loss 0.25, 640.0 samples/s (attempt 2); 12 reports kept" in out
    assert "~8,500 steps, ~1h02m (from the loss curve to step 10,000)" in out
    record = json.loads(run(server, capsys, "-o", "json", "job", jid)[1])["progress"]
    assert record["latest"]["step"] == 1500 and record["steps_left"] == 8500.0
    assert record["curve"] == {"b0": 1e-3, "b1": 1.0, "b2": 0.1}
    empty = server.call(lambda: server.fake.add_job(ELASTIC)).id
    assert "Progress" not in run(server, capsys, "job", empty)[1]
    assert json.loads(run(server, capsys, "-o", "json", "job", empty)[1])["progress"]["latest"] is None
