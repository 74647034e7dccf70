"""hctl against the fake master: real subprocesses for the contract, in-process for the rest."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from test_client_fake import FakeMaster, ThreadedFakeMaster

from horus_core.cli.main import main
from horus_core.cli.submit import submitter_path
from horus_core.model import JobSpec, JobState


@pytest.fixture
def server() -> Iterator[ThreadedFakeMaster]:
    with ThreadedFakeMaster(FakeMaster()).running() as srv:
        yield srv


def hctl(server: ThreadedFakeMaster | None, *args: str, master: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HORUS_MASTER": master or (server.address if server else "")}
    env.pop("HORUS_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "horus_core.cli", *args], capture_output=True, text=True, env=env, timeout=30
    )


def run(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--master", server.address, *args])
    out, err = capsys.readouterr()
    return code, out, err


def add(server: ThreadedFakeMaster, **kw: object) -> str:
    job = server.call(lambda: server.fake.add_job(**kw))  # type: ignore[arg-type]
    return job.id


# ----------------------------------------------------------------- the contract (subprocess)


def test_submit_prints_only_the_id(server: ThreadedFakeMaster) -> None:
    res = hctl(
        server,
        "submit",
        "--gpus",
        "2",
        "--name",
        "r18",
        "--type",
        "ResNet-18",
        "--env",
        "A=1",
        "B=x=y",
        "--exclusive",
        "--priority",
        "5",
        "--util-avg",
        "40",
        "--util-peak",
        "90",
        "--mem-mib",
        "3000",
        "--request-id",
        "req-7",
        "--",
        "python",
        "train.py",
        "--lr",
        "0.1",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "j-0001\n" and res.stderr == ""
    spec = server.fake.jobs["j-0001"].spec
    assert spec.command == ("python", "train.py", "--lr", "0.1")
    assert (spec.gpus, spec.name, spec.job_type, spec.exclusive, spec.priority) == (
        2,
        "r18",
        "ResNet-18",
        True,
        5,
    )
    assert spec.env[:2] == (("A", "1"), ("B", "x=y"))  # then the submitter's PATH (test below)
    assert (spec.hints.util_avg, spec.hints.util_peak, spec.hints.mem_mib) == (40.0, 90.0, 3000)
    assert server.fake.submit_request_ids == ["req-7"]


def test_jobs_json_contract_with_o_before_and_after(server: ThreadedFakeMaster) -> None:
    add(
        server,
        state=JobState.RUNNING,
        node="node-a",
        gpus=("GPU-a0", "GPU-a1"),
        attempt=1,
        predicted_slowdown=1.2,
    )
    add(server)
    before = hctl(server, "-o", "json", "jobs")
    after = hctl(server, "jobs", "-o", "json")
    assert before.returncode == after.returncode == 0, before.stderr
    assert before.stdout == after.stdout
    items = json.loads(before.stdout)
    assert isinstance(items, list) and len(items) == 2
    required = {
        "id",
        "state",
        "node",
        "gpus",
        "name",
        "type",
        "attempt",
        "reason",
        "predicted_slowdown",
        "submitted_at",
        "exit_code",
    }
    assert all(required <= set(item) for item in items)
    running = items[0]
    assert running["state"] == "RUNNING" and running["node"] == "node-a"
    assert running["gpus"] == ["GPU-a0", "GPU-a1"] and running["predicted_slowdown"] == 1.2
    assert items[1]["reason"] == "waiting for the next scheduling round"


def test_unreachable_master_is_one_line_exit_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = hctl(None, "nodes", master=f"127.0.0.1:{port}")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr.startswith(f"hctl: error: cannot reach the Horus master at 127.0.0.1:{port}: ")
    assert res.stderr.count("\n") == 1


def test_invalid_argument_from_master_names_field_exit_2(server: ThreadedFakeMaster) -> None:
    res = hctl(server, "submit", "--gpus", "8", "--", "python", "train.py")
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr == "hctl: error: gpus: asks for 8 GPUs but the largest node has 2\n"


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["submit", "--gpus", "1", "--env", "NOEQUALS", "--", "x"], "env: expected KEY=VALUE"),
        (["submit", "--gpus", "1"], "command: missing"),
        (["submit", "--gpus", "0", "--", "x"], "gpus: must be at least 1"),
        (["submit", "--gpus", "1", "--util-avg", "140", "--", "x"], "hints.util_avg"),
    ],
)
def test_local_bad_input_exit_2(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    code, out, err = run(server, capsys, *args)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1
    assert server.fake.submit_request_ids == []


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "--state", "SLEEPING"],
        ["nodes", "--", "x"],
        ["bogus"],
        ["-o", "yaml", "jobs"],
    ],
)
def test_usage_errors_exit_2(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--master", server.address, *args])
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_not_found_exit_1(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(server, capsys, "job", "j-nope")
    assert (code, out, err) == (1, "", "hctl: error: job j-nope not found\n")


def test_token_from_env(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server.fake.required_token = "tok"
    monkeypatch.setenv("HORUS_TOKEN", "tok")
    assert run(server, capsys, "info")[0] == 0
    assert run(server, capsys, "info", "--token", "bad")[0] == 1
    monkeypatch.delenv("HORUS_TOKEN")
    code, _, err = run(server, capsys, "info")
    assert code == 1 and "bearer token" in err


# ------------------------------------------------------------------------------- commands


def test_jobs_table_filters_and_shows_reason(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    pending = add(server, reason="needs 2 free GPU(s) on one node, largest free set is 1")
    done = add(server, state=JobState.SUCCEEDED)
    code, out, _ = run(server, capsys, "jobs")
    lines = out.splitlines()
    header = ["ID", "NAME", "STATE", "TYPE", "GPUS", "NODE", "SPEED", "AGE", "REASON"]
    assert code == 0 and lines[0].split() == header
    assert pending in out and "largest free set is 1" in out and done not in out
    assert done in run(server, capsys, "jobs", "--all")[1]
    code, out, _ = run(server, capsys, "jobs", "--state", "succeeded", "-o", "json")
    assert [j["id"] for j in json.loads(out)] == [done]


def test_job_detail_shows_reason_slowdown_co_runners_and_gpu_use(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    me = add(
        server,
        state=JobState.RUNNING,
        node="node-a",
        gpus=("GPU-a0",),
        attempt=1,
        predicted_slowdown=1.35,
        reason="placed with j-0002",
    )
    other = add(server, state=JobState.RUNNING, node="node-a", gpus=("GPU-a0",), attempt=1)
    code, out, _ = run(server, capsys, "job", me)
    assert code == 0
    assert "placed with j-0002" in out and "1.35" in out
    assert f"GPU-a0: {other}" in out and "Co-runners:" in out and "GPU use:" in out
    code, out, _ = run(server, capsys, "-o", "json", "job", me)
    record = json.loads(out)
    assert record["co_runners"] == {"GPU-a0": [other]}
    assert record["gpu_stats"] == [
        {
            "job_id": me,
            "attempt": 1,
            "gpu_uuid": "GPU-a0",
            "util_sm": 40.0,
            "mem_used_mib": 1000,
            "cap_mib": 0,
        }
    ]


def test_queue_in_queue_order(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    low = add(server, reason="no GPU free")
    high = add(server, spec=JobSpec(command=("x",), priority=10), reason="no GPU free")
    add(server, state=JobState.RUNNING)
    out = run(server, capsys, "queue", "-o", "json")[1]
    assert [(j["position"], j["id"]) for j in json.loads(out)] == [(1, high), (2, low)]
    out = run(server, capsys, "queue")[1]
    assert out.index(high) < out.index(low) and "no GPU free" in out


def test_queue_follows_the_masters_positions_with_codes(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Positions from the master's last pass come first (per queue); codes ride along in -o json."""
    late = add(server, reason="needs 2 GPUs", reason_code="Resources", queue_name="default", queue_position=2)
    first = add(
        server,
        reason="on a cordoned node",
        reason_code="NodeCordoned",
        queue_name="default",
        queue_position=1,
    )
    new = add(server, spec=JobSpec(command=("x",), priority=99), reason="waiting", reason_code="Submitted")
    listed = json.loads(run(server, capsys, "queue", "-o", "json")[1])
    assert [(j["id"], j["queue"], j["position"], j["reason_code"]) for j in listed] == [
        (first, "default", 1, "NodeCordoned"),
        (late, "default", 2, "Resources"),
        (new, "default", 3, "Submitted"),
    ]
    jobs = {j["id"]: j for j in json.loads(run(server, capsys, "jobs", "-o", "json")[1])}
    assert (jobs[late]["reason_code"], jobs[late]["reason"], jobs[late]["position"]) == (
        "Resources",
        "needs 2 GPUs",
        2,
    )
    assert jobs[new]["position"] is None
    table = run(server, capsys, "jobs")[1]
    assert "NodeCordoned: on a cordoned node" in table
    assert "CODE" in run(server, capsys, "queue")[1]


def test_nodes_json_and_table(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(server, capsys, "nodes", "-o", "json")
    nodes = json.loads(out)
    assert [(n["name"], n["state"]) for n in nodes] == [("node-a", "READY"), ("node-b", "LOST")]
    gpu = nodes[0]["gpus"][1]
    assert {k: gpu[k] for k in ("uuid", "index", "model", "memory_mib")} == {
        "uuid": "GPU-a1",
        "index": 1,
        "model": "NVIDIA H100",
        "memory_mib": 81559,
    }
    code, out, _ = run(server, capsys, "nodes")
    assert code == 0 and "node-b" in out and "0/1" in out and "2/2" in out


def test_gpus_profiles_info_top(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    job = add(
        server,
        state=JobState.RUNNING,
        node="node-a",
        gpus=("GPU-a1",),
        attempt=1,
        spec=JobSpec(("x",), name="bert"),
    )
    code, out, _ = run(server, capsys, "gpus")
    assert code == 0 and "UNHEALTHY" in out and job in out
    assert json.loads(run(server, capsys, "gpus", "-o", "json")[1])[1]["job_ids"] == [job]
    profiles = run(server, capsys, "profiles")[1]
    assert "ResNet-18 (batch size 32)" in profiles and "v100x1 640" in profiles
    assert "Measured pair speeds" in profiles and "0.90" in profiles
    (record,) = json.loads(run(server, capsys, "profiles", "-o", "json")[1])
    assert record["co_speed"] == {"VAE": 0.9} and record["solo_samples_per_s"] == {"v100x1": 640.0}
    assert [(p["co_runner"], p["gpu_type"], p["speed"], p["samples"]) for p in record["pairs"]] == [
        ("VAE", "v100", 0.9, 3)
    ]
    assert json.loads(run(server, capsys, "-o", "json", "info")[1])["policy"] == "fifo"
    code, out, _ = run(server, capsys, "top", "--once")
    assert code == 0 and "bert" in out and "40%" in out and "\x1b" not in out
    frame = json.loads(run(server, capsys, "top", "--once", "-o", "json")[1])
    assert frame["jobs"][0]["job_id"] == job


def test_cancel(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    job = add(server)
    assert run(server, capsys, "cancel", job) == (0, f"{job} CANCELLED\n", "")
    code, _, err = run(server, capsys, "cancel", job)
    assert code == 1 and err == f"hctl: error: job {job} is already CANCELLED\n"


def test_wait_exit_codes(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    ok = add(server, state=JobState.SUCCEEDED, exit_code=0)
    bad = add(server, state=JobState.FAILED, exit_code=3, reason="exit status 3")
    assert run(server, capsys, "wait", ok) == (0, f"{ok} SUCCEEDED (exit code 0)\n", "")
    assert run(server, capsys, "wait", bad) == (1, f"{bad} FAILED (exit code 3): exit status 3\n", "")
    slow = add(server)
    server.when_watching(lambda: server.fake.set_state(slow, JobState.SUCCEEDED, exit_code=0))
    assert run(server, capsys, "wait", slow)[0] == 0
    never = add(server)
    code, _, err = run(server, capsys, "wait", never, "--timeout", "0.2")
    assert code == 124 and err == f"hctl: error: job {never} did not finish within 0.2 s\n"  # not 1


def test_watch_one_job_until_it_ends(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    job = add(server)

    def progress() -> None:
        server.fake.set_state(job, JobState.RUNNING, "started", node="node-a")
        server.fake.set_state(job, JobState.SUCCEEDED, "exit 0")

    server.when_watching(progress)
    code, out, _ = run(server, capsys, "watch", job, "-o", "json")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(e["previous_state"], e["state"]) for e in events] == [
        ("PENDING", "RUNNING"),
        ("RUNNING", "SUCCEEDED"),
    ]


def test_logs(server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    job = add(server, state=JobState.SUCCEEDED, attempt=2)
    server.fake.logs[(job, 2)] = [b"epoch 1\n", b"epoch 2\n"]
    server.fake.logs[(job, 1)] = [b"crashed\n"]
    assert run(server, capsys, "logs", job) == (0, "epoch 1\nepoch 2\n", "")
    assert run(server, capsys, "logs", job, "--attempt", "1", "-f") == (0, "crashed\n", "")


def test_submit_command_after_dashes_keeps_its_own_options(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        server, capsys, "submit", "--gpus", "1", "--", "python", "x.py", "-o", "json", "--gpus", "9"
    )
    assert code == 0 and out == "j-0001\n"
    assert server.fake.jobs["j-0001"].spec.command == ("python", "x.py", "-o", "json", "--gpus", "9")
    code, out, _ = run(server, capsys, "-o", "json", "submit", "--gpus", "1", "nvidia-smi")
    assert code == 0 and json.loads(out)["command"] == ["nvidia-smi"]


def test_watch_a_finished_job_returns_at_once(
    server: ThreadedFakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    job = add(server, state=JobState.FAILED)
    assert run(server, capsys, "watch", job) == (0, "", f"hctl: job {job} has already finished: FAILED\n")
    assert run(server, capsys, "watch", "j-nope")[0] == 1


def test_node_service_texts_and_drain_timeout_parsing() -> None:
    from horus_core.cli import service
    from horus_core.model import Gpu, Node, NodeState

    bad = Gpu("g1", "n", 1, "V100", 16384, "v100", healthy=False, quarantine="Xid 79")
    node = Node(
        "n", (Gpu("g0", "n", 0, "V100", 16384, "v100"), bad), NodeState.DRAINING, drain_deadline=1000.0
    )
    assert service.state_text(node, now=970.0) == "DRAINING (preempts in 30s)"
    assert service.state_text(node, now=1001.0) == "DRAINING (preempting)"
    assert service.state_text(Node("m", (), NodeState.CORDONED)) == "CORDONED"
    assert service.quarantine_text(node) == "GPU 1: Xid 79" and service.quarantine_text(Node("m", ())) == "-"
    with pytest.raises(SystemExit):
        main(["drain", "n", "--timeout", "-3"])  # a usage error before anything is sent


# ------------------------------------------------------ where a process job runs (issue 29)


def test_a_process_job_runs_where_it_is_submitted_with_this_python_first(
    server: ThreadedFakeMaster, tmp_path: pathlib.Path
) -> None:
    env = {**os.environ, "HORUS_MASTER": server.address, "PATH": "/opt/tools:/usr/bin"}
    res = subprocess.run(
        [sys.executable, "-m", "horus_core.cli", "submit", "--gpus", "1", "--", "python", "train.py"],
        capture_output=True, text=True, env=env, timeout=30, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    spec = server.fake.jobs[res.stdout.strip()].spec
    assert spec.workdir == str(tmp_path)  # as sbatch: the directory submitted from
    here = os.path.dirname(sys.executable)
    assert dict(spec.env)["PATH"] == f"{here}:/opt/tools:/usr/bin"  # `python` is hctl's own


@pytest.mark.parametrize(
    ("flags", "workdir", "path"),
    [
        (["--workdir", "/srv/run"], "/srv/run", "local"),
        (["--env", "PATH=/only"], "cwd", "/only"),
        (["--image", "busybox:1"], "", None),  # a container keeps its image's directory and PATH
        (["--no-local-env"], "", None),
    ],
)
def test_what_overrides_the_submitters_directory_and_path(
    server: ThreadedFakeMaster,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    workdir: str,
    path: str | None,
) -> None:
    code, out, err = run(server, capsys, "submit", "--gpus", "1", *flags, "--", "python", "t.py")
    assert code == 0, err
    spec = server.fake.jobs[out.strip()].spec
    assert spec.workdir == (os.getcwd() if workdir == "cwd" else workdir)
    got = dict(spec.env).get("PATH")
    assert got == (submitter_path() if path == "local" else path)
