"""Rough edges a new user hit with ``hctl`` (issue 39): real hctl subprocesses against a live
master (real gRPC, SQLite), fake workers on the real stream."""

from __future__ import annotations

import json
import pathlib

from master_fakes import FakeWorker, client_for, running_master, spec
from test_hctl_first_hour import hctl

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb


async def test_a_finished_job_has_nothing_left(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        jid = (await stub.SubmitJob(cpb.SubmitJobRequest(spec=spec(total_steps=50_000)))).job.id
        a = await w.run_next()
        for k in range(0, 5_500, 500):
            p = wpb.AttemptProgress(job_id=jid, attempt=a.attempt, step=k, samples_per_s=100.0, at=1e9 + k)
            await w.send(progress=p)
        await w.barrier()
        code, out, _ = await hctl(m, "job", jid)
        assert code == 0 and "Remaining:" in out and "~45,000 steps" in out, out  # running: what is left
        await w.update(jid, a.attempt, pb.JOB_STATE_SUCCEEDED, exit_code=0)
        await w.barrier()
        code, out, _ = await hctl(m, "job", jid)
        remaining = next(line for line in out.splitlines() if line.startswith("Remaining"))
        assert remaining.split(":", 1)[1].strip() == "none: the job ended SUCCEEDED at step 5,000", out
        code, out, _ = await hctl(m, "job", jid, "-o", "json")
        progress = json.loads(out)["progress"]
        assert progress["steps_left"] is None and progress["seconds_left"] is None
        assert progress["estimate_from"] == "" and progress["latest"]["step"] == 5_000
        await w.close()


async def test_sizes_and_floors_say_what_is_accepted(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m:
        w = FakeWorker(m.port, "n1", n_gpus=1)
        await w.connect()
        code, _, err = await hctl(m, "submit", "--gpus", "1", "--gpu-memory", "0", "--", "true")
        assert code == 2 and "'0' (more than 0 and at most 4 TiB" in err, err
        assert "for no declared cap leave the size out" in err
        code, out, err = await hctl(m, "submit", "--gpus", "1", "--gpu-memory", "4GB", "--", "true")
        assert code == 0, err
        code, shown, _ = await hctl(m, "job", out.strip())
        assert "GPU memory:" in shown and "cap 3815 MiB (declared)" in shown  # 4GB = 4e9 bytes
        code, out, _ = await hctl(m, "submit", "--gpus", "1", "--gpu-memory", "4GiB", "--", "true")
        code, shown, _ = await hctl(m, "job", out.strip())
        assert "cap 4 GiB (declared)" in shown
        code, _, err = await hctl(m, "submit", "--gpus", "1", "--min-speed", "1.5", "--", "true")
        assert code == 2 and "or none for no floor at all" in err and "got 1.5" in err, err
        assert "-1 for" not in err
        await w.close()


async def test_a_misspelt_job_file_field_names_the_right_one(tmp_path: pathlib.Path) -> None:
    async with running_master(tmp_path) as m:
        path = tmp_path / "typo.yaml"
        path.write_text("run: x\nresources:\n  acelerators: 1\n")
        code, out, err = await hctl(m, "apply", "-f", str(path))
        assert code == 2 and not out, err
        assert "resources.acelerators: unknown field (did you mean `resources.accelerators`?) (line 3)" in err
