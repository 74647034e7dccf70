"""The README's quick use, run as written (issue 29, item 2): its shell block in bash from the
repository root, then its Python block, then the submit blocks of docs/gangs.md and
docs/elastic.md (``hctl`` on PATH, as an installed package puts it), against the master and
workers the README starts (real processes on loopback, simulated GPUs). Only addresses and /tmp
paths are swapped for free ports and this test's folder; one wait is added after the daemons
start in the background, where a person typing the lines would take that long anyway. Every
job must succeed."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent

pytestmark = pytest.mark.timeout(600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DOCS = ("gangs.md", "elastic.md")  # their first bash block: hctl submit lines


def blocks(lang: str) -> list[str]:
    """The README's fenced ``lang`` blocks under "Quick use", in order."""
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick use", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", quick, re.S)


def doc_block(name: str) -> str:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "docs" / name).read_text(), re.S)
    assert block is not None, name
    return block.group(1)


def submissions(text: str) -> int:
    """How many jobs a block submits: its ``hctl submit`` / ``hctl apply`` lines and SDK submits."""
    return len(re.findall(r"hctl (?:submit|apply) |\.submit\(", text))


def localised(text: str, tmp: pathlib.Path, ports: dict[str, int]) -> str:
    for old, new in ports.items():
        text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
    text = text.replace("/tmp/", f"{tmp}/")
    if BIN != ROOT / ".venv" / "bin":  # (a test run from another environment)
        text = text.replace(".venv/bin/", f"{BIN}/")
    return text


def ready_wait(script: str, hctl: str, addr: str) -> str:
    """``script`` with a wait for the master and both workers after the last background start."""
    lines = script.splitlines()
    last = max(i for i, line in enumerate(lines) if line.rstrip().endswith("&") or "&   #" in line)
    ready = f'[ "$({hctl} --master {addr} nodes -o json 2>/dev/null | grep -c READY)" = 2 ]'
    wait = f"for _ in $(seq 300); do {ready} && break; sleep 0.2; done"
    return "\n".join([*lines[: last + 1], wait, *lines[last + 1 :]])


def test_the_readme_quick_use_runs_as_written(tmp_path: pathlib.Path) -> None:
    shell, python = blocks("bash")[0], blocks("python")[0]
    ports = {"50051": free_port(), "8080": free_port(), "9400": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORUS_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # the workers' default state folders
    addr = f"127.0.0.1:{ports['50051']}"
    hctl = str(BIN / "hctl")
    script = "set -euo pipefail\n" + ready_wait(localised(shell, tmp_path, ports), hctl, addr)
    with open(tmp_path / "out.txt", "w") as o, open(tmp_path / "err.txt", "w") as e:  # (files: the
        proc = subprocess.Popen(  # daemons left in the background keep them open)
            ["bash", "-c", script], cwd=ROOT, env=env, stdout=o, stderr=e, text=True, start_new_session=True
        )
    try:
        proc.wait(timeout=240)
        out, err = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
        assert proc.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"
        assert "ResNet-18" in out and "Job types with a profile" in out  # hctl job / hctl info
        assert "SUCCEEDED" in out  # hctl wait $JOB
        code = localised(python, tmp_path, ports)
        sdk = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert sdk.returncode == 0 and " SUCCEEDED " in sdk.stdout, sdk.stdout + sdk.stderr
        metrics = subprocess.run(
            ["python3", "-c", f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{ports['9400']}/metrics').status)"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert metrics.stdout.strip() == "200"
        assert f"horus-master metrics on http://127.0.0.1:{ports['9400']}/metrics" in out  # as printed
        docs_env = {**env, "HORUS_MASTER": addr, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
        for name in DOCS:
            text = "set -euo pipefail\n" + localised(doc_block(name), tmp_path, ports)
            done = subprocess.run(
                ["bash", "-c", text], cwd=ROOT, env=docs_env, capture_output=True, text=True
            )
            assert done.returncode == 0 and done.stdout.strip(), (name, done.stderr)
        jobs = wait_all_done(hctl, addr, env, timeout=240.0)
        expected = sum(submissions(text) for text in (shell, python, *(doc_block(n) for n in DOCS)))
        assert len(jobs) == expected and {j["state"] for j in jobs} == {"SUCCEEDED"}, jobs
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the master and workers the script left running
        proc.wait(timeout=30)


def wait_all_done(
    hctl: str, addr: str, env: dict[str, str], timeout: float = 150.0
) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while True:
        listed = subprocess.run(
            [hctl, "--master", addr, "jobs", "--all", "-o", "json"], env=env, capture_output=True, text=True
        )
        jobs: list[dict[str, object]] = json.loads(listed.stdout)
        if (
            all(j["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") for j in jobs)
            or time.monotonic() > deadline
        ):
            return jobs
        time.sleep(1.0)
