"""SimulatedProbe: readings follow the attempts' profiles; speeds follow their co-runners."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import pytest

from horus_core.interference import default_model
from horus_core.model import JobSpec, ProfileHints
from worker.gpu.base import ProbeTarget
from worker.gpu.simulated import (
    CATALOG,
    FallbackModel,
    Profile,
    SimulatedProbe,
    parse_fake_gpus,
    simulated_gpus,
    simulated_uuid,
)

UUID_SHAPE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def spec(job_type: str, util: float, mem: int, peak: float | None = None) -> JobSpec:
    return JobSpec(command=("x",), job_type=job_type, hints=ProfileHints(util, peak or util, mem))


def target(job: str, gpus: Sequence[str], s: JobSpec, pid: int) -> ProbeTarget:
    return ProbeTarget(job, 1, (pid, pid + 1), tuple(gpus), s)


def test_parse_fake_gpus() -> None:
    assert parse_fake_gpus("4") == [CATALOG["v100"]] * 4
    assert parse_fake_gpus("2xK80") == [CATALOG["k80"]] * 2
    assert parse_fake_gpus("8xH100") == [CATALOG["h100"]] * 8
    assert parse_fake_gpus("1xv100, 2xP100") == [CATALOG["v100"], CATALOG["p100"], CATALOG["p100"]]
    for bad in ("", "0", "x", "4xQ9000", "-1", "65"):
        with pytest.raises(ValueError, match="--fake-gpus"):
            parse_fake_gpus(bad)


def test_simulated_uuids_are_stable_unique_and_shaped_like_nvml() -> None:
    a = simulated_gpus("node-a", parse_fake_gpus("4"))
    assert [g.uuid for g in a] == [g.uuid for g in simulated_gpus("node-a", parse_fake_gpus("4xV100"))]
    b = simulated_gpus("node-b", parse_fake_gpus("4"))
    uuids = {g.uuid for g in a + b}
    assert len(uuids) == 8
    assert all(UUID_SHAPE.match(u) for u in uuids)
    assert simulated_uuid("node-a", 2) == a[2].uuid
    assert [g.index for g in a] == [0, 1, 2, 3]
    assert a[0].model == "Tesla V100-SXM2-16GB" and a[0].memory_mib == 16384


async def test_idle_gpus_read_zero() -> None:
    probe = SimulatedProbe(simulated_gpus("n", parse_fake_gpus("2")), FallbackModel(), noise=0)
    gpus, procs = await probe.read([])
    assert [(g.util_sm, g.mem_used_mib, g.mem_total_mib) for g in gpus] == [(0.0, 0, 16384)] * 2
    assert procs == []
    assert probe.speed_of("nope", 1) == 1.0


async def test_readings_follow_profiles_and_cap_at_100() -> None:
    g = simulated_gpus("n", parse_fake_gpus("2"))
    probe = SimulatedProbe(g, FallbackModel(), noise=0)
    a = target("a", [g[0].uuid], spec("A", 40.0, 3000), pid=100)
    b = target("b", [g[0].uuid, g[1].uuid], spec("B", 70.0, 5000), pid=200)
    gpus, procs = await probe.read([a, b])
    by_uuid = {r.uuid: r for r in gpus}
    assert by_uuid[g[0].uuid].util_sm == 100.0  # 40 + 70, capped
    assert by_uuid[g[0].uuid].mem_used_mib == 8000
    assert by_uuid[g[1].uuid].util_sm == 70.0
    assert by_uuid[g[1].uuid].mem_used_mib == 5000
    # One reading per attempt and GPU, for the attempt's main pid; shares scaled to the cap.
    got = {(p.pid, p.gpu_uuid): (p.mem_used_mib, p.util_sm) for p in procs}
    assert got == {
        (100, g[0].uuid): (3000, round(40 * 100 / 110, 1)),
        (200, g[0].uuid): (5000, round(70 * 100 / 110, 1)),
        (200, g[1].uuid): (5000, 70.0),
    }
    # Speed: overloaded GPU 0 slows both; b is as slow as its slowest GPU.
    assert probe.speed_of("a", 1) == pytest.approx(100 / 110)
    assert probe.speed_of("b", 1) == pytest.approx(100 / 110)
    await probe.read([b])
    assert probe.speed_of("b", 1) == 1.0
    assert probe.speed_of("a", 1) == 1.0  # no longer running: default


async def test_memory_is_capped_and_noise_stays_between_avg_and_peak() -> None:
    g = simulated_gpus("n", parse_fake_gpus("1xK80"))
    probe = SimulatedProbe(g, FallbackModel(), noise=1.0, seed=7)
    t = target("a", [g[0].uuid], spec("A", 30.0, 20000, peak=60.0), pid=5)
    for _ in range(20):
        [reading], _ = await probe.read([t])
        assert 30.0 <= reading.util_sm <= 60.0
        assert reading.mem_used_mib == 11441


@dataclass(frozen=True)
class _P:
    util_avg: float
    util_peak: float
    mem_mib: int


class PairTable:
    """A stand-in interference model: 'bad' pairs run at 0.5, anything else at 1.0."""

    def enter(self, spec: JobSpec) -> None:
        return None

    def profile(self, spec: JobSpec) -> Profile:
        return _P(30.0, 30.0, 1000)

    def signature(self, spec: JobSpec) -> Hashable:
        return spec.job_type

    def co_speeds(self, signatures: Sequence[Hashable], gpu_type: str) -> tuple[float, ...]:
        assert gpu_type == "v100"
        bad = len(signatures) > 1 and "bad" in signatures
        return tuple(0.5 if bad else 1.0 for _ in signatures)


async def test_speed_comes_from_the_model_co_speeds() -> None:
    g = simulated_gpus("n", parse_fake_gpus("2"))
    probe = SimulatedProbe(g, PairTable(), noise=0)
    good = target("good", [g[0].uuid], spec("good", 1, 1), pid=10)
    bad = target("bad", [g[0].uuid], spec("bad", 1, 1), pid=20)
    alone = target("alone", [g[1].uuid], spec("bad", 1, 1), pid=30)
    await probe.read([good, bad, alone])
    speeds = [probe.speed_of(job, 1) for job in ("good", "bad", "alone")]
    assert speeds == [0.5, 0.5, 1.0]


async def test_the_packaged_model_gives_sane_readings() -> None:
    g = simulated_gpus("n", parse_fake_gpus("1"))
    probe = SimulatedProbe(g, default_model(), noise=0.5, seed=1)
    jobs = [
        target("r", [g[0].uuid], JobSpec(command=("x",), job_type="ResNet-18 (batch size 32)"), pid=1),
        target("t", [g[0].uuid], JobSpec(command=("x",), job_type="Transformer (batch size 128)"), pid=3),
    ]
    [reading], procs = await probe.read(jobs)
    assert 0.0 < reading.util_sm <= 100.0
    assert 0 < reading.mem_used_mib <= reading.mem_total_mib
    assert {p.pid for p in procs} == {1, 3}
    for job in ("r", "t"):
        assert 0.0 < probe.speed_of(job, 1) <= 1.0
