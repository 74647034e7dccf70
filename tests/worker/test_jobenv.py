"""The environment every attempt gets (worker/jobenv.py): its identity, its report files and its
GPU count (WORLD_SIZE, LOCAL_WORLD_SIZE, HORUS_GPUS), seen by a real process."""

from __future__ import annotations

import json
import pathlib
import sys

from horus_core.model import JobSpec, JobState
from horus_core.progress import PROGRESS_ENV, SPEED_ENV
from worker.files import AttemptFiles
from worker.jobenv import attempt_env
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.process import ProcessRuntime

KEY = AttemptKey("job-7", 3)


def test_the_gpu_count_follows_the_assignment(tmp_path: pathlib.Path) -> None:
    files = AttemptFiles.of(tmp_path, KEY)
    for gpus in (("g0",), ("g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7")):
        env = dict(attempt_env(KEY, gpus, files, "w1"))
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["HORUS_GPUS"] == str(len(gpus))
        assert env["CUDA_VISIBLE_DEVICES"] == ",".join(gpus)
    assert (env["HORUS_JOB_ID"], env["HORUS_ATTEMPT"], env["HORUS_WORKER"]) == ("job-7", "3", "w1")
    assert env[PROGRESS_ENV] == str(files.progress) and env[SPEED_ENV] == str(files.speed)


async def test_a_process_sees_its_count_and_the_user_cannot_forge_it(tmp_path: pathlib.Path) -> None:
    files = AttemptFiles.of(tmp_path, KEY)
    gpus = ("GPU-a", "GPU-b", "GPU-c")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    spec = JobSpec((sys.executable, "-c", code), env=(("WORLD_SIZE", "99"), ("MINE", "x")))
    request = LaunchRequest(KEY, spec, gpus, tmp_path / "out.log", attempt_env(KEY, gpus, files, "w1"))
    attempt = await ProcessRuntime(tmp_path).start(request)
    assert (await attempt.wait()).state is JobState.SUCCEEDED
    env = json.loads((tmp_path / "out.log").read_text())
    assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["HORUS_GPUS"] == "3" and env["MINE"] == "x"
