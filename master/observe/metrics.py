"""The master's Prometheus registry: gauges read from memory at scrape time, plus the scheduler's
histograms and counters (the only metrics updated as things happen).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from horus_core import reasoncodes as rc
from horus_core.metrics import gpu_families, job_families
from horus_core.model import JobState, NodeState
from master.loopmon import LoopMonitor
from master.observe.view import ClusterView, ViewSources, gather
from master.services.events import JobEvent
from master.services.scheduler import PassResult
from master.store.live import LiveIndex

WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 86400)
PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class _ViewCollector(Collector):
    """Families from the :class:`ClusterView` the scrape just gathered."""

    def __init__(self) -> None:
        self.view: ClusterView | None = None

    def collect(self) -> Iterator[Metric]:
        view = self.view
        if view is None:
            return
        yield from gpu_families(g.sample() for g in view.gpus())
        yield from job_families(view.job_samples())
        yield _pending(view)
        yield _nodes(view)
        yield _jobs(view)
        yield _quarantined(view)


def _pending(view: ClusterView) -> Metric:
    fam = GaugeMetricFamily("horus_pending_jobs", "Pending jobs by the reason they wait.", labels=["reason"])
    for reason, n in sorted(view.pending_reasons.items()):
        fam.add_metric([reason], n)
    return fam


def _nodes(view: ClusterView) -> Metric:
    fam = GaugeMetricFamily(
        "horus_nodes", "Nodes by state (connected: with an open stream).", labels=["state"]
    )
    states = Tally(n.entry.shown_state.value for n in view.nodes)
    for state in NodeState:
        fam.add_metric([state.value], states.get(state.value, 0))
    fam.add_metric(["CONNECTED"], sum(1 for n in view.nodes if n.entry.connected))
    return fam


def _quarantined(view: ClusterView) -> Metric:
    fam = GaugeMetricFamily("horus_quarantined_gpus", "GPUs quarantined after an Xid or ECC error.")
    fam.add_metric([], sum(len(n.entry.quarantined) for n in view.nodes))
    return fam


class _CodeCollector(Collector):
    """Pending jobs by reason code (docs/reasons.md), every code of the vocabulary always present."""

    def __init__(self, live: Callable[[], LiveIndex]) -> None:
        self.live = live  # the index the master holds now (rebuilt at start)

    def collect(self) -> Iterator[Metric]:
        pending = JobState.PENDING
        counts = Tally(j.reason_code for j in self.live().jobs() if j.state is pending)
        fam = GaugeMetricFamily(
            "horus_pending_jobs_by_code", "Pending jobs by reason code (docs/reasons.md).", labels=["code"]
        )
        for code in sorted(rc.CODES | set(counts) - {""}):
            fam.add_metric([code], counts.get(code, 0))
        yield fam


class _LoopCollector(Collector):
    """The event-loop lag the master's LoopMonitor measures (what GetServerStats reports)."""

    def __init__(self, monitor: LoopMonitor) -> None:
        self.monitor = monitor

    def collect(self) -> Iterator[Metric]:
        s = self.monitor.snapshot()
        lag = GaugeMetricFamily(
            "horus_event_loop_lag_seconds",
            "How late a task sleeping a fixed interval wakes up, over the recent window (quantile 1 = max).",
            labels=["quantile"],
        )
        for q, ms in (("0.5", s.p50_ms), ("0.99", s.p99_ms), ("1", s.max_ms)):
            lag.add_metric([q], ms / 1000)
        yield lag
        yield CounterMetricFamily(
            "horus_event_loop_lag_samples",
            "Loop-lag samples recorded since the master started.",
            value=s.total,
        )


def _jobs(view: ClusterView) -> Metric:
    fam = GaugeMetricFamily("horus_live_jobs", "Pending and active jobs by state.", labels=["state"])
    states = Tally(j.state.value for j in view.jobs.values() if j.state.active)
    fam.add_metric([JobState.PENDING.value], view.pending_count)
    for state in (JobState.ASSIGNED, JobState.RUNNING):
        fam.add_metric([state.value], states.get(state.value, 0))
    return fam


class MasterMetrics:
    """Owns the registry. ``on_pass`` and ``on_event`` are the scheduler's and the event bus's
    hooks; :meth:`render` gathers the view (from ``sources``) and prints the text format.
    ``live``: the master's live-job index (the pending jobs' reason codes)."""

    def __init__(
        self, sources: ViewSources, live: Callable[[], LiveIndex], monitor: LoopMonitor | None = None
    ) -> None:
        self._sources = sources
        self.registry = CollectorRegistry()
        self._view = _ViewCollector()
        self.registry.register(self._view)
        self.registry.register(_CodeCollector(live))
        if monitor is not None:
            self.registry.register(_LoopCollector(monitor))
        self.pass_seconds = Histogram(
            "horus_scheduling_pass_seconds",
            "Duration of a scheduling pass (snapshot, policy decision, commit, dispatch).",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.admission_wait = Histogram(
            "horus_admission_wait_seconds",
            "From submission to the job's first placement.",
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.placements = Counter("horus_placements", "Attempts placed on GPUs.", registry=self.registry)
        self.preemptions = Counter(
            "horus_preemptions", "Running attempts stopped and re-queued by a policy.", registry=self.registry
        )

    def on_pass(self, seconds: float, result: PassResult) -> None:
        self.pass_seconds.observe(seconds)
        self.placements.inc(result.assigned)
        self.preemptions.inc(result.preempted)

    def on_event(self, ev: JobEvent) -> None:
        job = ev.job
        if ev.previous is JobState.PENDING and job.state is JobState.ASSIGNED and job.attempt == 1:
            self.admission_wait.observe(max(0.0, ev.at - job.submitted_at))

    async def render(self) -> bytes:
        view = await gather(self._sources)
        self._view.view = view  # (no await between this and the rendering below)
        return generate_latest(self.registry)
