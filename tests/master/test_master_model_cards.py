"""Model cards end to end on a real master (grpc.aio on port 0, a SQLite file): submitted through
the SDK, stored, answered back, handed to the interference model before the next pass (and again
after a restart), a bad card refused naming its field with nothing stored; ``--throughputs``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import subprocess
import sys

import grpc
import pytest
from master_fakes import client_for, config

from horus_core.client import HorusClient
from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.interference import default_model
from horus_core.interference.table import load_table
from horus_core.model import JobSpec
from horus_core.modelcard import card_signature, card_to_dict, card_to_json, packaged_cards
from horus_core.testing import FakeClock
from master.app import Master

CARD = packaged_cards()["ViT-B/16 (batch size 32)"]
REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "docs" / "gpu-runs" / "2026-11-27-h200" / "h200_throughputs.json"


async def test_a_card_is_stored_answered_and_predicts_the_profile(tmp_path: pathlib.Path) -> None:
    model = default_model()
    sig = card_signature(CARD)
    cfg = config(tmp_path)
    async with (
        Master(cfg, clock=FakeClock(), interference=model) as m,
        HorusClient.connect(f"127.0.0.1:{m.port}") as c,
    ):
        job = await c.submit(JobSpec(command=("python", "train.py"), model_card=CARD))
        assert job.spec.model_card == CARD
        assert (await c.get(job.id)).spec.model_card == CARD
        assert model.profile_of(sig).source == "default"  # (not before a pass)
        await m.scheduler.run_once()
        assert model.profile_of(sig).source == "card"
        typed = await c.submit(JobSpec(command=("t",), job_type="my-vit", model_card=CARD))
        await m.scheduler.run_once()
        assert model.profile_of("my-vit") == model.profile_of(sig)
        assert typed.spec.model_card == CARD
    again = default_model()
    async with (
        Master(cfg, clock=FakeClock(), interference=again) as m,  # live jobs' cards, re-read
        HorusClient.connect(f"127.0.0.1:{m.port}") as c,
    ):
        assert again.profile_of(sig).source == "card" and again.profile_of("my-vit").source == "card"
        assert (await c.get(job.id)).spec.model_card == CARD


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (json.dumps({**card_to_dict(CARD), "batch": -3}), "model_card.batch"),
        (json.dumps({**card_to_dict(CARD), "schema": 9}), "model_card.schema"),
        (card_to_json(CARD).replace('"step":', '"step":-'), "model_card.flops.step"),
        ("{not json", "model_card"),
        (json.dumps({**card_to_dict(CARD), "described_with": "x" * 20000}), "model_card"),
    ],
)
async def test_a_bad_card_is_refused_by_name_and_nothing_is_stored(
    tmp_path: pathlib.Path, text: str, field: str
) -> None:
    async with Master(config(tmp_path), clock=FakeClock()) as m, client_for(m) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            request = cpb.SubmitJobRequest(spec=pb.JobSpec(command=["t"], gpus=1, model_card=text))
            await stub.SubmitJob(request)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(field)
        assert await m.store.read.count_jobs() == 0


async def test_hctl_submit_model_card_reaches_hctl_job_json(tmp_path: pathlib.Path) -> None:
    card_file = tmp_path / "card.json"
    card_file.write_text(card_to_json(CARD, indent=2))
    async with Master(config(tmp_path), clock=FakeClock()) as m:
        hctl = [sys.executable, "-m", "horus_core.cli", "--master", f"127.0.0.1:{m.port}"]
        sub = await _run(
            [*hctl, "submit", "--gpus", "1", "--model-card", str(card_file), "--", "python", "t.py"]
        )
        job_id = sub.strip()
        shown = json.loads(await _run([*hctl, "job", job_id, "-o", "json"]))
        assert shown["model_card"] == card_to_dict(CARD)
        text = await _run([*hctl, "job", job_id])
        assert "Model card" in text and "reference:ViT-B/16" in text
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**card_to_dict(CARD), "params": -1}))
        code, err = await _exit([*hctl, "submit", "--gpus", "1", "--model-card", str(bad), "--", "t"])
        assert code == 2 and "model_card.params" in err
        assert await m.store.read.count_jobs() == 1


async def _run(argv: list[str]) -> str:
    code, out, err = await _call(argv)
    assert code == 0, err
    return out


async def _exit(argv: list[str]) -> tuple[int | None, str]:
    code, _, err = await _call(argv)
    return code, err


async def _call(argv: list[str]) -> tuple[int | None, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def test_a_master_runs_on_a_table_of_ones_own(tmp_path: pathlib.Path) -> None:
    cfg = dataclasses.replace(config(tmp_path), throughputs=H200)
    async with Master(cfg, clock=FakeClock()) as m:
        assert m.port > 0
    assert load_table(H200).pair_gpu_types == ("h200",)


def test_a_master_refuses_to_start_with_a_bad_table(tmp_path: pathlib.Path) -> None:
    raw = json.loads(H200.read_text())
    raw["h200"]["('ViT-B/16 (batch size 32)', 1)"]["null"] = float("nan")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    proc = subprocess.run(
        [sys.executable, "-m", "master.main", "--db", str(tmp_path / "x.db"), "--throughputs", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "('ViT-B/16 (batch size 32)', 1)" in proc.stderr
    assert not (tmp_path / "x.db").exists()  # refused before it opened anything
