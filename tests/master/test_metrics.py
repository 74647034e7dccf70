"""The master's /metrics: scraped over real HTTP from a live master (real gRPC, real SQLite, a
worker speaking the real stream protocol) and parsed with prometheus-client's own parser; the
values must agree with what the API (ListGpus, ListJobs) reports."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import aiohttp
import pytest
from master_fakes import FakeWorker, client_for, config
from prometheus_client.parser import text_string_to_metric_families

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb
from horus_core.metrics import reason_label
from horus_core.model import NodeState
from horus_core.plane import JobGpuReading
from horus_core.testing import FakeClock
from master.app import Master
from master.observe.history import UtilHistory
from master.services import transitions as tr
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.session import Session
from master.store.learned import RecordRatesOp

Samples = dict[str, list[Any]]
ROOT = pathlib.Path(__file__).resolve().parents[2]


async def scrape(port: int) -> Samples:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples.get(name, [])}


async def place_two_of_three(m: Master, stub: Any, w: FakeWorker) -> list[str]:
    """fifo on 2 GPUs: two jobs placed and RUNNING, the third pending."""
    ids = []
    for i in range(3):
        req = cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1, name=f"j{i}", job_type="resnet"))
        ids.append((await stub.SubmitJob(req)).job.id)
    placed = [await w.recv_kind("assign") for _ in range(2)]
    for a in placed:
        await w.update(a.job_id, a.attempt, pb.JOB_STATE_RUNNING)
    await w.barrier()
    await m.scheduler.run_once()  # the third job gets its reason
    return [a.job_id for a in placed]


async def test_master_metrics_match_the_api(tmp_path: pathlib.Path) -> None:
    master = Master(config(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:0")
    async with master as m, client_for(m) as stub:
        assert m.http.metrics_port > 0
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        placed = await place_two_of_three(m, stub, w)
        on_gpu = {}
        for jid in placed:
            job = await stub.GetJob(cpb.GetJobRequest(job_id=jid))
            on_gpu[job.gpus[0]] = job
        stats = [
            pb.GpuStats(
                uuid=g.uuid,
                util_sm=30.0 + 25 * i,
                mem_used_mib=1000 + i,
                mem_total_mib=16384,
                temperature_c=50 + i,
                power_w=100.0 + i,
                healthy=True,
            )
            for i, g in enumerate(w.gpus)
        ]
        usage = [
            pb.JobGpuStats(job_id=j.id, attempt=1, gpu_uuid=uuid, util_sm=20.0 + k, mem_used_mib=500 + k)
            for k, (uuid, j) in enumerate(sorted(on_gpu.items()))
        ]
        await w.heartbeat(running=tuple((j, 1) for j in placed), gpus=stats, jobs=usage)
        await w.barrier()

        got = await scrape(m.http.metrics_port)
        api = (await stub.ListGpus(cpb.ListGpusRequest())).gpus
        assert len(api) == 2
        util = by_label(got, "DCGM_FI_DEV_GPU_UTIL", "UUID")
        used = by_label(got, "DCGM_FI_DEV_FB_USED", "UUID")
        free = by_label(got, "DCGM_FI_DEV_FB_FREE", "UUID")
        for g in api:
            assert util[g.gpu.uuid] == pytest.approx(g.stats.util_sm)
            assert used[g.gpu.uuid] == g.stats.mem_used_mib
            assert free[g.gpu.uuid] == g.stats.mem_total_mib - g.stats.mem_used_mib
        first = next(s for s in got["DCGM_FI_DEV_GPU_TEMP"] if s.labels["UUID"] == w.gpus[1].uuid)
        assert first.labels == {
            "gpu": "1",
            "UUID": w.gpus[1].uuid,
            "modelName": "Tesla V100",
            "Hostname": "n1",
        }
        assert first.value == 51
        assert by_label(got, "DCGM_FI_DEV_POWER_USAGE", "UUID")[w.gpus[0].uuid] == 100.0

        # Per job: the job ids on each GPU are the API's, with the worker's per-job numbers.
        jobs_on = {s.labels["UUID"]: s.labels["job"] for s in got["horus_job_gpu_utilization"]}
        assert jobs_on == {g.gpu.uuid: g.job_ids[0] for g in api}
        for g in api:
            row = next(s for s in got["horus_job_gpu_memory_used_bytes"] if s.labels["UUID"] == g.gpu.uuid)
            assert row.value == g.jobs[0].mem_used_mib * 2**20
            assert row.labels["queue"] == "default" and row.labels["user"] == "anonymous"
        predicted = by_label(got, "horus_job_predicted_speed_ratio", "job")
        assert set(predicted) == set(placed)
        assert "horus_job_speed_ratio" not in got  # nothing measured yet

        # Queue and scheduler.
        pending = (await stub.ListJobs(cpb.ListJobsRequest(states=[pb.JOB_STATE_PENDING]))).jobs
        assert len(pending) == 1
        assert by_label(got, "horus_pending_jobs", "reason") == {reason_label(pending[0].reason): 1.0}
        assert by_label(got, "horus_nodes", "state") == {
            "READY": 1,
            "LOST": 0,
            "DRAINING": 0,
            "CORDONED": 0,
            "CONNECTED": 1,
        }
        assert by_label(got, "horus_live_jobs", "state") == {"PENDING": 1, "ASSIGNED": 0, "RUNNING": 2}
        assert got["horus_placements_total"][0].value == 2
        assert got["horus_preemptions_total"][0].value == 0
        assert got["horus_admission_wait_seconds_count"][0].value == 2
        assert got["horus_scheduling_pass_seconds_count"][0].value >= 2
        await w.close()


async def test_measured_speed_is_progress_over_learned_solo(tmp_path: pathlib.Path) -> None:
    master = Master(config(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:0")
    async with master as m, client_for(m) as stub:
        w = FakeWorker(m.port, "n1", n_gpus=2)
        await w.connect()
        placed = await place_two_of_three(m, stub, w)
        row = await m.core.store.read.job(placed[0])
        assert row is not None
        entry = m.core.registry.get("n1")
        assert entry is not None
        gpu_type = entry.gpu_types()[row.job.gpus[0]]
        sig = m.core.learner.signature(row.job)
        await m.core.store.write(RecordRatesOp(sig, gpu_type, 1, 80.0, (), 0.0))
        await w.send(progress=wpb.AttemptProgress(job_id=placed[0], attempt=1, step=5, samples_per_s=60.0))
        await w.barrier()
        got = await scrape(m.http.metrics_port)
        speeds = by_label(got, "horus_job_speed_ratio", "job")
        assert speeds == {}  # series exist per job and GPU the worker reports: none reported yet
        usage = [pb.JobGpuStats(job_id=placed[0], attempt=1, gpu_uuid=row.job.gpus[0], util_sm=10)]
        await w.heartbeat(running=((placed[0], 1), (placed[1], 1)), jobs=usage)
        await w.barrier()
        got = await scrape(m.http.metrics_port)
        assert by_label(got, "horus_job_speed_ratio", "job") == {placed[0]: pytest.approx(0.75)}
        await w.close()
    # Every series the Grafana dashboard queries is one the master exports.
    dashboard = json.loads((ROOT / "docker" / "grafana" / "horus-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"\b(?:DCGM_FI_\w+|horus_\w+)", e)}
    assert used and used <= set(got), used - set(got)


async def test_metrics_listen_that_cannot_bind_fails_start(tmp_path: pathlib.Path) -> None:
    master = Master(config(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:notaport")
    with pytest.raises(OSError, match="HOST:PORT"):
        await master.start()


def test_util_history_is_per_job_and_bounded() -> None:
    registry = NodeRegistry()
    entry = NodeEntry("n1", (), NodeState.READY, 0.0, session=Session("n1"))
    registry.put(entry)
    history = UtilHistory(points=3, max_jobs=2)
    for t in range(5):
        entry.job_stats = (
            JobGpuReading(job_id="a", attempt=1, gpu_uuid="g0", util_sm=10.0 * t),
            JobGpuReading(job_id="a", attempt=1, gpu_uuid="g1", util_sm=30.0),
            JobGpuReading(job_id="b", attempt=1, gpu_uuid="g1", util_sm=5.0),
        )
        history.sample(registry, float(t))
    assert history.of("a") == [(2.0, 25.0), (3.0, 30.0), (4.0, 35.0)]  # mean over its GPUs, last 3
    assert history.of("b") == [(2.0, 5.0), (3.0, 5.0), (4.0, 5.0)]
    entry.job_stats = (JobGpuReading(job_id="c", attempt=1, gpu_uuid="g0", util_sm=50.0),)
    history.sample(registry, 5.0)
    assert history.of("c") == [(5.0, 50.0)] and history.of("a") == []  # the least recently seen went
    entry.session.close("gone")  # type: ignore[union-attr]
    history.sample(registry, 6.0)
    assert history.of("c") == [(5.0, 50.0)]  # a disconnected node's last report is not sampled again


async def test_pending_reasons_count_together_whatever_their_numbers(tmp_path: pathlib.Path) -> None:
    master = Master(config(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:0")
    async with master as m, client_for(m) as stub:
        ids = []
        for _ in range(4):
            req = cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1))
            ids.append((await stub.SubmitJob(req)).job.id)
        reasons = [
            "queued behind 3 jobs (look-ahead 5)",
            "queued behind 12 jobs (look-ahead 5)",
            "needs 2.5 GiB",
        ]
        await m.core.writer.apply((i, tr.set_wait_reason(r, 1.0)) for i, r in zip(ids, reasons, strict=False))
        got = await scrape(m.http.metrics_port)
        last = await stub.GetJob(cpb.GetJobRequest(job_id=ids[3]))
    assert by_label(got, "horus_pending_jobs", "reason") == {
        "queued behind N jobs (look-ahead N)": 2,
        "needs N GiB": 1,
        last.reason: 1,  # (no node: "no ready nodes")
    }
    assert by_label(got, "horus_live_jobs", "state")["PENDING"] == 4


async def test_pending_codes_after_a_restart_come_from_the_jobs_it_loaded(tmp_path: pathlib.Path) -> None:
    """The metrics are built before the master loads its live jobs: the codes a scrape counts are
    those of the index the master holds at scrape time, the jobs of the previous run included."""
    async with Master(config(tmp_path), clock=FakeClock()) as m, client_for(m) as stub:
        for _ in range(3):
            await stub.SubmitJob(cpb.SubmitJobRequest(spec=pb.JobSpec(command=["x"], gpus=1)))
        await m.core.writer.set_pending_reason("no ready nodes", "Unschedulable")
    master = Master(config(tmp_path), clock=FakeClock(), metrics_listen="127.0.0.1:0")
    async with master as m:
        got = await scrape(m.http.metrics_port)
    codes = by_label(got, "horus_pending_jobs_by_code", "code")
    assert codes["Unschedulable"] == 3 and sum(codes.values()) == 3
