"""hctl for multi-node gangs: submit's shape flags, every node of a job with its GPUs, and the
merge of the parts' logs with a ``[node]`` prefix per line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import pytest
from test_client_fake import FakeMaster, ThreadedFakeMaster

from horus_core.cli.logs import NodePrefixer
from horus_core.cli.main import main
from horus_core.cli.records import job_parts, job_record
from horus_core.cli.submit import total_gpus
from horus_core.errors import InvalidArgument
from horus_core.model import Job, JobSpec, JobState

GANG = Job(
    "j1",
    JobSpec(("x",), gpus=6),
    JobState.RUNNING,
    attempt=1,
    node="a",
    gpus=("a0", "a1", "a2", "a3", "b0", "b1"),
    nodes=("a", "b"),
)


@pytest.fixture
def server() -> Iterator[ThreadedFakeMaster]:
    with ThreadedFakeMaster(FakeMaster()).running() as srv:
        yield srv


def test_prefixer_emits_whole_lines_of_each_node() -> None:
    p = NodePrefixer()
    assert p.feed("a", b"one\ntw") == b"[a] one\n"
    assert p.feed("b", b"x\n") == b"[b] x\n"
    assert p.feed("a", b"o\nthree") == b"[a] two\n"
    assert p.flush() == b"[a] three\n" and p.flush() == b""
    assert p.feed("", b"plain") == b"plain"  # a job on one node: as it came


def test_job_parts_split_a_gang_by_its_gpus_nodes() -> None:
    node_of = {"a0": "a", "a1": "a", "a2": "a", "a3": "a", "b0": "b", "b1": "b"}
    assert job_parts(GANG, node_of) == [("a", ["a0", "a1", "a2", "a3"]), ("b", ["b0", "b1"])]
    # unknown GPUs go by position (listed node by node)
    assert job_parts(GANG, {}) == [("a", ["a0", "a1", "a2"]), ("b", ["a3", "b0", "b1"])]
    one = Job("j2", JobSpec(("x",)), JobState.RUNNING, node="c", gpus=("c0",))
    assert job_record(one)["nodes"] == [{"name": "c", "gpus": ["c0"]}]
    assert job_record(Job("j3", JobSpec(("x",)), JobState.PENDING))["nodes"] == []


def test_submit_takes_the_total_from_the_shape_when_gpus_is_left_out() -> None:
    ns = argparse.Namespace(gpus=None, gpus_per_node=4, nodes=2)
    assert total_gpus(ns) == 8
    assert total_gpus(argparse.Namespace(gpus=3, gpus_per_node=0, nodes=0)) == 3
    with pytest.raises(InvalidArgument, match="--gpus N"):
        total_gpus(argparse.Namespace(gpus=None, gpus_per_node=4, nodes=0))


def test_submit_sends_the_shape(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--master", server.address, "submit", "--gpus-per-node", "1", "--nodes", "2", "--", "true"])
    job_id = capsys.readouterr().out.strip()
    assert code == 0
    spec = server.fake.jobs[job_id].spec
    assert (spec.gpus, spec.gpus_per_node, spec.nodes) == (2, 1, 2)
    bad = main(["--master", server.address, "submit", "--gpus", "3", "--nodes", "2", "--", "true"])
    assert bad == 2 and "multiple of nodes (2)" in capsys.readouterr().err
    missing = main(["--master", server.address, "submit", "--", "true"])
    assert missing == 2 and "missing: give --gpus N" in capsys.readouterr().err


def test_job_json_lists_every_node(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    job = server.call(
        lambda: server.fake.add_job(state=JobState.RUNNING, node="a", gpus=("a0", "b0"), nodes=("a", "b"))
    )
    assert main(["--master", server.address, "job", job.id, "-o", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in record["nodes"]] == ["a", "b"]
    assert [g for n in record["nodes"] for g in n["gpus"]] == ["a0", "b0"]
    assert main(["--master", server.address, "job", job.id]) == 0
    assert "a (rank 0): a0; b (rank 1): b0" in capsys.readouterr().out
