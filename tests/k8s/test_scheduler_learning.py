"""horus-k8s learns from the node agents' reports as the master does from heartbeats: a pod that
ran alone, then beside another, and ended leaves its solo throughput and its pair speed in
Horus's store (a real SQLite store, the master's learner; the reports as the agent renders
them). A stale, repeated or broken report teaches nothing."""

from __future__ import annotations

import pathlib
from typing import Any

from horus_core.interference import default_model
from horus_core.k8s.world import build
from horus_core.k8sreport import GpuReadingK8s, NodeReport, PodReading, render_report
from horus_core.model import JobState
from horus_core.testing import FakeClock
from master.k8s.learning import ReportFeed
from master.learning.learner import Learner
from master.store import Store
from tests.k8s.test_translate import node, pod

R18, R50 = "ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)"


def _bound(name: str, job_type: str) -> dict[str, Any]:
    notes = {"horus.io/job-type": job_type, "horus.io/node": "n1", "horus.io/gpus": "0", "horus.io/rank": "0"}
    p = pod(name, notes=notes, spec={"nodeName": "n1"})
    p["status"]["phase"] = "Running"
    return p


def _report(at: float, step: int, pods: list[tuple[str, str, float]]) -> dict[str, Any]:
    """A ConfigMap holding n1's report: ``pods`` as (uid, name, samples/s)."""
    readings = tuple(
        PodReading(uid, "team-a", name, ("GPU-n1-0",), 50.0, 2000, rate, step) for uid, name, rate in pods
    )
    report = NodeReport("n1", at, 15.0, (GpuReadingK8s("GPU-n1-0", 0, "A100", 90.0, 4000, 40960),), readings)
    return {"metadata": {"name": "horus-node-n1"}, "data": {"report.json": render_report(report)}}


async def test_reports_teach_solo_and_pair_speeds_into_the_store(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    store = await Store.open(tmp_path / "learned.db")
    try:
        learner = Learner(store, clock, default_model(), settle_s=0.0)
        feed = ReportFeed(learner)
        alone = build([node("n1", 1)], [_bound("a", R18)], "horus")
        both = build([node("n1", 1)], [_bound("a", R18), _bound("b", R50)], "horus")
        assert [j.state for j in both.snapshot.jobs] == [JobState.RUNNING, JobState.RUNNING]
        step = 0
        for world, pods in (
            (alone, [("uid-a", "a", 100.0)]),
            (both, [("uid-a", "a", 40.0), ("uid-b", "b", 30.0)]),
        ):
            for _ in range(5):
                clock.advance(15.0)
                step += 10
                feed.feed(world, [_report(clock.now(), step, pods)], clock.now())
            await feed.ended(world)
        fed = feed.fed
        feed.feed(both, [_report(clock.now(), step, [])], clock.now())  # the same report again
        feed.feed(both, [_report(clock.now() - 3600, step + 1, [])], clock.now())  # stale
        feed.feed(both, [{"metadata": {"name": "x"}, "data": {"report.json": "{"}}], clock.now())
        assert feed.fed == fed == 10
        await feed.ended(build([node("n1", 1)], [], "horus"))  # both pods gone: their attempts ended
        pairs = {(p.job_type, p.co_runner): p.speed for p in await store.read.pair_speeds()}
        assert 0.3 < pairs[(R18, R50)] < 0.5, pairs  # 40 samples/s beside R50, 100 alone
        solo = {(s.job_type, s.gpu_type) for s in await store.read.solo_throughputs(100)}
        assert (R18, "a100") in solo
    finally:
        await store.close()
