"""ProcessRuntime with real subprocesses: environment, exit states, logs, stop, process groups."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from horus_core.model import JobSpec, JobState
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.pgroups import GroupRecords, group_members
from worker.runtime.process import ProcessAttempt, ProcessRuntime

PY = sys.executable
KEY = AttemptKey("job-1", 2)
GPUS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000")


def request(
    tmp: pathlib.Path,
    *command: str,
    env: tuple[tuple[str, str], ...] = (),
    key: AttemptKey = KEY,
    image: str = "",
) -> LaunchRequest:
    spec = JobSpec(command=command, env=env, image=image)
    extra = (
        ("HORUS_JOB_ID", key.job_id),
        ("HORUS_ATTEMPT", str(key.attempt)),
        ("HORUS_PROGRESS_FILE", str(tmp / "p.jsonl")),
        ("HORUS_SPEED_FILE", str(tmp / "speed")),
    )
    return LaunchRequest(key, spec, GPUS, tmp / "attempt" / "output.log", extra)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def spawn(*command: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(command, text=True, **kwargs)


async def wait_until(cond: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def read(path: pathlib.Path) -> str:
    return path.read_text() if path.exists() else ""


async def wait_for_line(path: pathlib.Path, text: str) -> str:
    await wait_until(lambda: text in read(path))
    return read(path)


async def test_env_contract(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORUS_JOIN_TOKEN", "worker-secret")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("SOME_WORKER_VAR", "kept")
    user_env = (
        ("CUDA_VISIBLE_DEVICES", "7"),
        ("LD_PRELOAD", "/evil.so"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("HORUS_JOB_ID", "spoofed"),
        ("MY_VAR", "mine"),
        ("SOME_WORKER_VAR", "user wins"),
    )
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    runtime = ProcessRuntime(tmp_path)
    attempt = await runtime.start(request(tmp_path, PY, "-c", code, env=user_env))
    status = await attempt.wait()
    assert status.state is JobState.SUCCEEDED
    env = json.loads((tmp_path / "attempt" / "output.log").read_text())
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(GPUS)
    assert env["HORUS_JOB_ID"] == "job-1" and env["HORUS_ATTEMPT"] == "2"
    assert env["HORUS_PROGRESS_FILE"] == str(tmp_path / "p.jsonl")
    assert env["HORUS_SPEED_FILE"] == str(tmp_path / "speed")
    assert env["MY_VAR"] == "mine" and env["SOME_WORKER_VAR"] == "user wins"
    for reserved in ("LD_PRELOAD", "NVIDIA_VISIBLE_DEVICES", "HORUS_JOIN_TOKEN"):
        assert reserved not in env
    assert "PATH" in env


@pytest.mark.parametrize(
    ("code", "state", "exit_code", "reason"),
    [
        ("pass", JobState.SUCCEEDED, 0, "exited with code 0"),
        ("raise SystemExit(3)", JobState.FAILED, 3, "exited with code 3"),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            JobState.FAILED,
            137,
            "killed by signal SIGKILL",
        ),
    ],
)
async def test_exit_codes_map_to_states(
    tmp_path: pathlib.Path, code: str, state: JobState, exit_code: int, reason: str
) -> None:
    attempt = await ProcessRuntime(tmp_path).start(request(tmp_path, PY, "-c", code))
    status = await attempt.wait()
    assert (status.state, status.exit_code, status.reason) == (state, exit_code, reason)
    assert await attempt.wait() == status  # wait() can be asked again


async def test_stdout_and_stderr_go_to_the_log_and_cwd_is_the_attempt_dir(tmp_path: pathlib.Path) -> None:
    code = "\n".join(
        (
            "import os, sys",
            "print('to stdout', flush=True)",
            "print('to stderr', file=sys.stderr)",
            "print(os.getcwd())",
        )
    )
    attempt = await ProcessRuntime(tmp_path).start(request(tmp_path, PY, "-c", code))
    await attempt.wait()
    text = (tmp_path / "attempt" / "output.log").read_text()
    assert "to stdout" in text and "to stderr" in text
    assert str(tmp_path / "attempt") in text


async def test_stop_a_cooperative_process_is_cancelled(tmp_path: pathlib.Path) -> None:
    cmd = (PY, "-m", "horus_core.workload", "--steps", "10000", "--steps-per-s", "20")
    attempt = await ProcessRuntime(tmp_path).start(request(tmp_path, *cmd))
    log = tmp_path / "attempt" / "output.log"
    await wait_for_line(log, "workload")
    await attempt.stop(5.0, "killed by the master: preempted")
    status = await attempt.wait()
    assert (status.state, status.exit_code, status.reason) == (
        JobState.CANCELLED,
        143,
        "killed by the master: preempted",
    )
    assert "received SIGTERM" in log.read_text()


async def test_stop_sigkills_a_process_ignoring_sigterm_after_grace(tmp_path: pathlib.Path) -> None:
    code = textwrap.dedent("""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "60"])   # a grandchild in the same group
        print("ready", child.pid, flush=True)
        time.sleep(60)
    """)
    attempt = await ProcessRuntime(tmp_path).start(request(tmp_path, PY, "-c", code))
    log = tmp_path / "attempt" / "output.log"
    text = await wait_for_line(log, "ready")
    grandchild = int(text.split()[1])
    assert isinstance(attempt, ProcessAttempt)
    assert set(attempt.pids()) >= {attempt.pid, grandchild}
    assert attempt.pids()[0] == attempt.pid
    start = time.monotonic()
    await attempt.stop(0.5, "cancelled by user")
    elapsed = time.monotonic() - start
    status = await attempt.wait()
    assert status.state is JobState.CANCELLED and status.exit_code == 137
    assert 0.5 <= elapsed < 5.0
    await wait_until(lambda: not alive(grandchild))
    assert attempt.pids() == []


async def test_leftovers_of_a_finished_leader_are_killed(tmp_path: pathlib.Path) -> None:
    code = "import subprocess; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True)"
    attempt = await ProcessRuntime(tmp_path).start(request(tmp_path, PY, "-c", code))
    assert (await attempt.wait()).state is JobState.SUCCEEDED
    orphan = int(read(tmp_path / "attempt" / "output.log").split()[0])
    await wait_until(lambda: not alive(orphan))


async def test_start_failures_raise(tmp_path: pathlib.Path) -> None:
    runtime = ProcessRuntime(tmp_path)
    with pytest.raises(FileNotFoundError):
        await runtime.start(request(tmp_path, "/nonexistent/train"))
    with pytest.raises(RuntimeError, match="--runtime docker"):
        await runtime.start(request(tmp_path, "true", image="busybox:latest"))


async def test_group_is_recorded_while_running_and_forgotten_after(tmp_path: pathlib.Path) -> None:
    runtime = ProcessRuntime(tmp_path)
    attempt = await runtime.start(request(tmp_path, "sleep", "30"))
    records = GroupRecords(tmp_path / "pgroups")
    [(_, record)] = records.load()
    assert record is not None and record.key == KEY and record.alive()
    await attempt.stop(1.0, "bye")
    await attempt.wait()
    assert records.load() == []
    assert await runtime.recover(tmp_path) == []


async def test_remove_orphans_kills_recorded_groups_of_a_previous_life(tmp_path: pathlib.Path) -> None:
    records = GroupRecords(tmp_path / "pgroups")
    orphan = spawn("sleep", "60", start_new_session=True)
    kept = spawn("sleep", "60", start_new_session=True)
    gone = spawn("true", start_new_session=True)
    gone.wait()
    try:
        records.save(AttemptKey("old", 1), orphan.pid)
        records.save(AttemptKey("keep", 1), kept.pid)
        records.save(AttemptKey("gone", 1), gone.pid)
        killed = await ProcessRuntime(tmp_path).remove_orphans({AttemptKey("keep", 1)})
        assert killed == [AttemptKey("old", 1)]
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert kept.poll() is None
        assert [r.key for _, r in records.load() if r is not None] == [AttemptKey("keep", 1)]
    finally:
        for p in (orphan, kept):
            p.kill()
            p.wait()


async def test_a_dead_unreaped_leader_is_not_alive(tmp_path: pathlib.Path) -> None:
    records = GroupRecords(tmp_path / "pgroups")
    zombie = spawn("true", start_new_session=True)
    try:
        records.save(AttemptKey("old", 1), zombie.pid)
        await wait_until(lambda: not alive(zombie.pid))  # exited, not reaped: a zombie
        [(_, record)] = records.load()
        assert record is not None and not record.alive()
        assert await ProcessRuntime(tmp_path).remove_orphans(set()) == []
    finally:
        zombie.wait()


async def test_a_reused_pid_is_not_killed(tmp_path: pathlib.Path) -> None:
    records = GroupRecords(tmp_path / "pgroups")
    stranger = spawn("sleep", "60", start_new_session=True)
    try:
        records.save(AttemptKey("old", 1), stranger.pid)
        path = next((tmp_path / "pgroups").glob("*.json"))
        record = json.loads(path.read_text())
        record["start_time"] += 1  # the recorded leader started at another time: not ours
        path.write_text(json.dumps(record))
        assert await ProcessRuntime(tmp_path).remove_orphans(set()) == []
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


FAKE_WORKER = textwrap.dedent("""
    import asyncio, pathlib, sys
    from horus_core.model import JobSpec
    from worker.runtime.base import AttemptKey, LaunchRequest
    from worker.runtime.process import ProcessRuntime

    async def main():
        tmp = pathlib.Path(sys.argv[1])
        rt = ProcessRuntime(tmp)
        spec = JobSpec(command=("sleep", "60"))
        req = LaunchRequest(AttemptKey("j", 1), spec, ("GPU-x",), tmp / "out.log", ())
        attempt = await rt.start(req)
        print(attempt.pid, flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
""")


async def test_attempt_dies_with_a_sigkilled_worker(tmp_path: pathlib.Path) -> None:
    fake = spawn(PY, "-c", FAKE_WORKER, str(tmp_path), stdout=subprocess.PIPE)
    try:
        assert fake.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(fake.stdout.readline), 20)
        job_pid = int(line)
        assert alive(job_pid) and group_members(job_pid) == [job_pid]
        fake.kill()  # SIGKILL: no chance to clean up; the parent-death signal does it
        fake.wait()
        await wait_until(lambda: not alive(job_pid), within=5)
    finally:
        fake.kill()
        fake.wait()
        if fake.stdout is not None:
            fake.stdout.close()


class HeldRecords(GroupRecords):
    """Holds the removal of a group's record (the reaper's step after the exit) until released."""

    def __init__(self, directory: pathlib.Path) -> None:
        super().__init__(directory)
        self.removing, self.release = threading.Event(), threading.Event()

    def remove(self, key: AttemptKey) -> None:
        self.removing.set()
        self.release.wait(10)
        super().remove(key)


async def test_a_stop_after_the_exit_keeps_the_attempts_own_result(tmp_path: pathlib.Path) -> None:
    """A Kill that comes after the process ended on its own, while the reaper is still busy, did
    not end it: its own result stands (it was reported CANCELLED, and a finished job re-ran)."""
    records = HeldRecords(tmp_path / "pgroups")
    proc = await asyncio.create_subprocess_exec("true", start_new_session=True)
    attempt = ProcessAttempt(KEY, proc, records)
    await asyncio.to_thread(records.removing.wait, 10)  # exited, and seen to
    stop = asyncio.create_task(attempt.stop(5.0, "killed by the master: preempted"))
    await asyncio.sleep(0)  # the stop has been asked for
    records.release.set()
    await stop
    status = await attempt.wait()
    assert (status.state, status.exit_code) == (JobState.SUCCEEDED, 0)
