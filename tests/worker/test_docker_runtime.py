"""DockerRuntime against a real Docker Engine (``scripts/docker-test-setup.sh`` starts one).

Skipped, with the reason, where no engine answers or the offline test image is missing; with
HORUS_REQUIRE_DOCKER=1 (CI, after the setup script) those are failures instead.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import uuid
from collections.abc import AsyncIterator, Iterator

import aiodocker
import pytest
from aiodocker.exceptions import DockerError

from horus_core.errors import FailedPrecondition
from horus_core.model import JobSpec, JobState
from tests.docker_engine import IMAGE, require_engine
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker import DockerRuntime
from worker.runtime.docker_config import MountNotAllowed

pytestmark = pytest.mark.docker
GPUS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-2222-3333-4444-555555555555")


@pytest.fixture(scope="module", autouse=True)
def _engine() -> Iterator[None]:
    require_engine()
    yield


@pytest.fixture
def worker_name() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def runtime(worker_name: str) -> AsyncIterator[DockerRuntime]:
    rt = await DockerRuntime.open(worker_name, orphan_grace_s=0)
    yield rt
    await rt.remove_orphans(set())  # whatever a test left behind
    await rt.close()


def _launch(
    tmp: pathlib.Path, *command: str, job: str = "job-1", attempt: int = 1, **spec: object
) -> LaunchRequest:
    fields: dict[str, object] = {"command": command, "image": IMAGE}
    fields.update(spec)
    return LaunchRequest(
        AttemptKey(job, attempt),
        JobSpec(**fields),  # type: ignore[arg-type]
        GPUS,
        tmp / "logs" / job / f"{attempt}.log",
        (("HORUS_JOB_ID", job),),
    )


def _read(path: pathlib.Path) -> str:
    return path.read_text() if path.exists() else ""


async def _wait_for_text(path: pathlib.Path, text: str) -> None:
    for _ in range(200):  # polls a file written by another task: up to 10 s
        if text in _read(path):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}")


async def _exists(container_id: str) -> bool:
    async with aiodocker.Docker() as docker:
        try:
            await docker.containers.get(container_id)
        except DockerError as err:
            assert err.status == 404
            return False
        return True


async def test_echo_succeeds_with_logs_and_the_container_is_removed(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    request = _launch(tmp_path, "sh", "-c", "echo hello from horus; echo to stderr >&2")
    attempt = await runtime.start(request)
    status = await asyncio.wait_for(attempt.wait(), 20)
    assert (status.state, status.exit_code) == (JobState.SUCCEEDED, 0)
    # stdout and stderr are separate pipes: their relative order is not kept
    assert sorted(request.log_path.read_text().splitlines()) == ["hello from horus", "to stderr"]
    assert not await _exists(attempt.container_id)
    assert await attempt.wait() == status  # the final status stays readable


async def test_nonzero_exit_fails_with_its_code(runtime: DockerRuntime, tmp_path: pathlib.Path) -> None:
    attempt = await runtime.start(_launch(tmp_path, "sh", "-c", "exit 3"))
    status = await asyncio.wait_for(attempt.wait(), 20)
    assert (status.state, status.exit_code, status.reason) == (JobState.FAILED, 3, "exited with code 3")


async def test_memory_limit_kills_and_says_out_of_memory(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    hog = _launch(tmp_path, "sh", "-c", "x=$(yes | head -c 100000000); echo ${#x}", memory_mib=32)
    status = await asyncio.wait_for((await runtime.start(hog)).wait(), 30)
    assert (status.state, status.exit_code) == (JobState.FAILED, 137)
    assert status.reason == "killed: out of memory (exit code 137)"


async def test_env_has_the_gpus_and_no_reserved_user_keys(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    user_env = (
        ("FOO", "bar"),
        ("CUDA_VISIBLE_DEVICES", "all"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("LD_PRELOAD", "/evil.so"),
        ("HORUS_JOB_ID", "forged"),
    )
    request = _launch(tmp_path, "env", env=user_env)
    status = await asyncio.wait_for((await runtime.start(request)).wait(), 20)
    assert status.state is JobState.SUCCEEDED
    env = dict(line.split("=", 1) for line in request.log_path.read_text().splitlines())
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == ",".join(GPUS)
    assert env["FOO"] == "bar" and env["HORUS_JOB_ID"] == "job-1" and "LD_PRELOAD" not in env


async def test_the_job_sees_its_progress_and_speed_files(
    runtime: DockerRuntime, tmp_path: pathlib.Path
) -> None:
    request = _launch(
        tmp_path,
        "sh",
        "-c",
        'cat "$HORUS_SPEED_FILE"; echo \'{"step": 7}\' >> "$HORUS_PROGRESS_FILE";'
        ' echo 2.0 > "$HORUS_SPEED_FILE" || echo speed is read-only',
    )
    attempt_dir = request.log_path.parent
    env = (
        *request.env,
        ("HORUS_PROGRESS_FILE", str(attempt_dir / "progress.jsonl")),
        ("HORUS_SPEED_FILE", str(attempt_dir / "speed")),
    )
    attempt_dir.mkdir(parents=True)
    (attempt_dir / "speed").write_text("0.5000\n")
    request = LaunchRequest(request.key, request.spec, request.gpu_uuids, request.log_path, env)
    status = await asyncio.wait_for((await runtime.start(request)).wait(), 20)
    assert status.state is JobState.SUCCEEDED, _read(request.log_path)
    assert (attempt_dir / "progress.jsonl").read_text() == '{"step": 7}\n'
    assert "0.5000" in _read(request.log_path) and "speed is read-only" in _read(request.log_path)
    assert (attempt_dir / "speed").read_text() == "0.5000\n"


async def test_hardened_host_config_then_stop_cancels(
    runtime: DockerRuntime, tmp_path: pathlib.Path, worker_name: str
) -> None:
    attempt = await runtime.start(_launch(tmp_path, "sleep", "1000", cpus=0.5, memory_mib=64))
    async with aiodocker.Docker() as docker:
        info = await (await docker.containers.get(attempt.container_id)).show()
    host = info["HostConfig"]
    assert host["Privileged"] is False
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 4096
    assert host["NetworkMode"] == "none"
    assert host["IpcMode"] == "private" and host["PidMode"] == "" and not host.get("Binds")
    assert (host["NanoCpus"], host["Memory"]) == (500_000_000, 64 << 20)
    found = info["Config"]["Labels"]
    assert (found["horus.worker"], found["horus.job_id"]) == (worker_name, "job-1")
    assert found["horus.attempt"] == "1"
    (pid,) = attempt.pids()  # a host PID: the GPU probe walks /proc from it
    assert pid == info["State"]["Pid"] and "sleep" in _read(pathlib.Path(f"/proc/{pid}/cmdline"))

    await attempt.stop(1.0, "cancelled by alice")  # busybox sleep as PID 1 ignores SIGTERM: killed
    status = await asyncio.wait_for(attempt.wait(), 20)
    assert (status.state, status.reason) == (JobState.CANCELLED, "cancelled by alice")
    assert status.exit_code == 137 and attempt.pids() == []
    assert not await _exists(attempt.container_id)


async def test_host_mounts_need_the_allow_list(worker_name: str, tmp_path: pathlib.Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "f.txt").write_text("from the host\n")
    rt = await DockerRuntime.open(worker_name, allow_mounts=[str(shared)], orphan_grace_s=0)
    try:
        with pytest.raises(MountNotAllowed, match="mount /etc not allowed"):
            await rt.start(_launch(tmp_path, "cat", "/host/passwd", mounts=("/etc:/host",)))
        request = _launch(
            tmp_path,
            "sh",
            "-c",
            "cat /in/f.txt && ! touch /in/new",
            job="job-2",
            mounts=(f"{shared}:/in:ro",),
        )
        status = await asyncio.wait_for((await rt.start(request)).wait(), 20)
        assert status.state is JobState.SUCCEEDED, request.log_path.read_text()
        assert "from the host\n" in request.log_path.read_text()
        assert not (shared / "new").exists()
    finally:
        await rt.remove_orphans(set())
        await rt.close()


async def test_a_restarted_worker_reattaches_and_removes_orphans(
    worker_name: str, tmp_path: pathlib.Path
) -> None:
    first = await DockerRuntime.open(worker_name, orphan_grace_s=0)
    keep_req = _launch(tmp_path, "sh", "-c", "echo one; sleep 2; echo two; sleep 1000", job="keep")
    orphan_req = _launch(tmp_path, "sleep", "1000", job="orphan", attempt=2)
    done_req = _launch(tmp_path, "sh", "-c", "echo bye; sleep 1; exit 5", job="done", attempt=4)
    kept = await first.start(keep_req)
    orphan = await first.start(orphan_req)
    await first.start(done_req)
    await _wait_for_text(keep_req.log_path, "one\n")
    await first.close()  # the worker dies; its containers do not

    second = await DockerRuntime.open(worker_name, orphan_grace_s=0)
    try:
        await asyncio.sleep(1.2)  # "done" exits while no worker watches it
        recovered = {a.key: a for a in await second.recover(tmp_path / "logs")}
        assert set(recovered) == {AttemptKey("keep", 1), AttemptKey("orphan", 2), AttemptKey("done", 4)}
        assert recovered[AttemptKey("keep", 1)].pids()

        done = await asyncio.wait_for(recovered[AttemptKey("done", 4)].wait(), 20)
        assert (done.state, done.exit_code) == (JobState.FAILED, 5)
        assert done_req.log_path.read_text() == "bye\n"

        removed = await second.remove_orphans({AttemptKey("keep", 1)})
        assert removed == [AttemptKey("orphan", 2)]
        assert not await _exists(orphan.container_id)

        await _wait_for_text(keep_req.log_path, "two\n")
        assert keep_req.log_path.read_text() == "one\ntwo\n"  # resumed, nothing copied twice
        again = recovered[AttemptKey("keep", 1)]
        await again.stop(0, "lease expired")
        assert (await asyncio.wait_for(again.wait(), 20)).state is JobState.CANCELLED
        assert not await _exists(kept.container_id)
    finally:
        await second.remove_orphans(set())
        await second.close()


async def test_missing_image_or_command_is_a_clear_failure(
    runtime: DockerRuntime, tmp_path: pathlib.Path, worker_name: str
) -> None:
    with pytest.raises(FailedPrecondition, match="not on this worker"):
        await runtime.start(_launch(tmp_path, "true", image="horus-no-such-image:never"))
    with pytest.raises(FailedPrecondition, match="did not start"):
        await runtime.start(_launch(tmp_path, "/no/such/program", job="job-2"))
    async with aiodocker.Docker() as docker:  # the failed container was removed
        filters = json.dumps({"label": [f"horus.worker={worker_name}"]})
        assert await docker.containers.list(all=True, filters=filters) == []
