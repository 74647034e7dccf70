"""One fault scenario: a real master, a worker ``w1`` behind the fault proxy and a healthy worker
``w2`` (where re-queued jobs run, so a double run would show), short leases, jobs that record their
attempts, one fault applied to ``w1``'s link or a process and healed, then the promises checked.

The promises: no two attempts of a job overlap; no attempt stays ASSIGNED longer than a bound;
every acknowledged submission exists and succeeds; the node is READY once healed.
"""

from __future__ import annotations

import itertools
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import types_pb2 as pb
from tests.e2e.cluster import LocalCluster
from tests.faults.proxy import FaultProxy, Mode

LEASE_S, KILL_GRACE_S, NODE_TIMEOUT_S, HEARTBEAT_S = 1.5, 0.5, 3.0, 0.2
TIMEOUTS = (
    *("--tick-s", "0.1", "--heartbeat-s", str(HEARTBEAT_S), "--lease-s", str(LEASE_S)),
    *("--node-timeout-s", str(NODE_TIMEOUT_S)),  # kill grace derived: min(5, 3 - 1.5 - 1) = 0.5 s
)
ACK_TIMEOUT_S = 2 * LEASE_S + KILL_GRACE_S + 1.0  # MasterConfig.ack_timeout_s
ASSIGNED_BOUND_S = ACK_TIMEOUT_S + 3.0  # plus a tick, the poll interval and a loaded machine
JOB_S = 8.0  # longer than the node timeout: an attempt re-queued too early would still run
RECORDER = pathlib.Path(__file__).with_name("recorder.py")


@dataclass
class Fault:
    """What to do to the cluster for ``hold_s`` seconds; ``heal`` undoes it."""

    name: str
    apply: Callable[[LocalCluster, FaultProxy], None]
    heal: Callable[[LocalCluster, FaultProxy], None]
    hold_s: float = 0.0
    master_down: bool = False  # submissions wait until healed


def proxy_fault(name: str, mode: Mode, hold_s: float) -> Fault:
    return Fault(name, lambda c, p: p.set_mode(mode), lambda c, p: p.heal(), hold_s)


def _signal_worker(sig: signal.Signals) -> Callable[[LocalCluster, FaultProxy], None]:
    return lambda c, p: c.workers["w1"].send_signal(sig)


def _restart_worker(c: LocalCluster, p: FaultProxy) -> None:
    c.workers["w1"].wait(10)
    c.start_worker("w1", "2", master=f"127.0.0.1:{p.port}")


def _stop_master(sig: signal.Signals) -> Callable[[LocalCluster, FaultProxy], None]:
    def run(c: LocalCluster, p: FaultProxy) -> None:
        assert c.master is not None
        c.master.send_signal(sig)
        if sig is signal.SIGKILL:
            c.master.wait(10)

    return run


def _restart_master(c: LocalCluster, p: FaultProxy) -> None:
    c.start_master()


def _cont_master(c: LocalCluster, p: FaultProxy) -> None:
    assert c.master is not None
    c.master.send_signal(signal.SIGCONT)


FAULTS = {
    f.name: f
    for f in (
        Fault("none", lambda c, p: None, lambda c, p: None),
        proxy_fault("drop-up", Mode.DROP_UP, NODE_TIMEOUT_S + 1.5),  # the master stops hearing the worker
        proxy_fault("drop-down", Mode.DROP_DOWN, NODE_TIMEOUT_S + 1.0),  # the worker stops hearing the master
        proxy_fault("drop-both", Mode.DROP_BOTH, NODE_TIMEOUT_S + 1.5),
        proxy_fault(
            "pause", Mode.PAUSE, (LEASE_S + NODE_TIMEOUT_S) / 2
        ),  # > lease, < node timeout, TCP alive
        proxy_fault("pause-long", Mode.PAUSE, NODE_TIMEOUT_S + 1.5),
        proxy_fault("delay", Mode.DELAY, 4.0),
        Fault("reset", lambda c, p: p.reset(), lambda c, p: None, 0.5),
        Fault("worker-sigkill", _signal_worker(signal.SIGKILL), _restart_worker, 1.0),
        Fault(
            "worker-sigstop",
            _signal_worker(signal.SIGSTOP),
            _signal_worker(signal.SIGCONT),
            (LEASE_S + NODE_TIMEOUT_S) / 2,
        ),
        Fault(
            "worker-sigstop-long",
            _signal_worker(signal.SIGSTOP),
            _signal_worker(signal.SIGCONT),
            NODE_TIMEOUT_S + 1.5,
        ),
        Fault("master-sigkill", _stop_master(signal.SIGKILL), _restart_master, 1.0, master_down=True),
        Fault("master-sigstop", _stop_master(signal.SIGSTOP), _cont_master, LEASE_S + 1.0, master_down=True),
    )
}


@dataclass
class Observer:
    """Polls ListJobs in a thread: how long each (job, attempt) was seen ASSIGNED."""

    stub: cgrpc.HorusServiceStub
    assigned: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Observer:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                jobs = self.stub.ListJobs(cpb.ListJobsRequest(page_size=1000), timeout=1.0).jobs
            except (grpc.RpcError, ValueError):  # the master is down or stopped; or the channel closed
                continue
            now = time.monotonic()
            for j in jobs:
                if j.state == pb.JOB_STATE_ASSIGNED:
                    seen = self.assigned.setdefault((j.id, j.attempt), [now, now])
                    seen[1] = now

    def longest_assigned(self) -> float:
        return max((last - first for first, last in self.assigned.values()), default=0.0)


def intervals(out: pathlib.Path) -> dict[str, list[tuple[float, float, str]]]:
    """job id -> (first tick, last tick, file) of each attempt process, by start."""
    found: dict[str, list[tuple[float, float, str]]] = {}
    for path in out.iterdir():
        ticks = [float(x) for x in path.read_text().split() if x != "done"]
        if ticks:
            found.setdefault(path.name.split(".")[0], []).append((ticks[0], ticks[-1], path.name))
    return {k: sorted(v) for k, v in found.items()}


def overlaps(out: pathlib.Path) -> list[str]:
    bad = []
    for job, runs in intervals(out).items():
        latest_end, latest = float("-inf"), ""
        for start, end, name in runs:
            if start <= latest_end:
                bad.append(f"{job}: {latest} ran until {latest_end:.3f}, {name} started at {start:.3f}")
            if end > latest_end:
                latest_end, latest = end, name
    return bad


def min_gap(out: pathlib.Path) -> float | None:
    """The shortest time between one attempt's last tick and the next attempt's first (None: no re-run)."""
    gaps = [b[0] - a[1] for runs in intervals(out).values() for a, b in itertools.pairwise(runs)]
    return round(min(gaps), 3) if gaps else None


class Scenario:
    def __init__(self, tmp: pathlib.Path, fault: Fault) -> None:
        self.tmp, self.fault = tmp, fault
        self.out = tmp / "records"
        self.out.mkdir()
        self.cluster = LocalCluster(tmp, timeouts=TIMEOUTS)
        self.proxy: FaultProxy | None = None
        self.channel: grpc.Channel | None = None
        self.ids: list[str] = []

    def __enter__(self) -> Scenario:
        self.cluster.start_master()
        self.proxy = FaultProxy(self.cluster.port).start()
        self.cluster.start_worker("w1", "2", master=f"127.0.0.1:{self.proxy.port}")
        self.channel = grpc.insecure_channel(self.cluster.addr)
        self.stub = cgrpc.HorusServiceStub(self.channel)
        self.cluster.wait_nodes(1, timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.cluster.workers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        if self.cluster.master is not None and self.cluster.master.poll() is None:
            self.cluster.master.send_signal(signal.SIGCONT)
        self.cluster.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self.channel is not None:
            self.channel.close()

    def submit(self, n: int = 1) -> None:
        cmd = [sys.executable, str(RECORDER), str(self.out), str(JOB_S)]
        for _ in range(n):
            req = cpb.SubmitJobRequest(
                request_id=f"fault-{len(self.ids)}", spec=pb.JobSpec(command=cmd, gpus=1)
            )
            self.ids.append(self.stub.SubmitJob(req, timeout=30, wait_for_ready=True).job.id)

    def wait_placed(self, count: int, timeout: float = 30.0) -> None:
        states = [pb.JOB_STATE_ASSIGNED, pb.JOB_STATE_RUNNING]
        deadline = time.monotonic() + timeout
        while len(self.stub.ListJobs(cpb.ListJobsRequest(states=states), timeout=5).jobs) < count:
            assert time.monotonic() < deadline, f"{count} jobs were not placed: " + self.cluster.logs()
            time.sleep(0.05)

    def wait_running(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.stub.ListJobs(cpb.ListJobsRequest(states=[pb.JOB_STATE_RUNNING]), timeout=5).jobs
            if len(jobs) >= count and len(list(self.out.iterdir())) >= count:
                return
            time.sleep(0.1)
        raise AssertionError(f"{count} jobs did not start: " + self.cluster.logs())

    def wait_done(self, timeout: float) -> dict[str, pb.Job]:
        deadline = time.monotonic() + timeout
        jobs: dict[str, pb.Job] = {}
        while time.monotonic() < deadline:
            try:
                jobs = {
                    i: self.stub.GetJob(cpb.GetJobRequest(job_id=i), timeout=5, wait_for_ready=True)
                    for i in self.ids
                }
            except grpc.RpcError:
                jobs = {}
            if jobs and all(j.state == pb.JOB_STATE_SUCCEEDED for j in jobs.values()):
                return jobs
            time.sleep(0.2)
        states = {i: (pb.JobState.Name(j.state), j.attempt, j.reason) for i, j in jobs.items()}
        raise AssertionError(f"not all jobs succeeded in {timeout} s: {states}\n{self.cluster.logs()}")

    def node_states(self, timeout: float = 20.0) -> set[str]:
        """The set of node states once all are READY (or at the timeout)."""
        deadline = time.monotonic() + timeout
        states: set[str] = set()
        while time.monotonic() < deadline:
            nodes = self.stub.ListNodes(cpb.ListNodesRequest(), timeout=5, wait_for_ready=True).nodes
            states = {pb.NodeState.Name(n.state) for n in nodes}
            if states == {"NODE_STATE_READY"} and len(nodes) == 2:
                return states
            time.sleep(0.2)
        return states


def run(tmp: pathlib.Path, fault: Fault) -> dict[str, object]:
    """Run ``fault`` once; raises AssertionError on a broken promise, else returns the figures."""
    with Scenario(tmp, fault) as sc:
        observer = Observer(sc.stub).start()
        try:
            return _run(sc, fault, observer)
        finally:
            observer.stop()


def _run(sc: Scenario, fault: Fault, observer: Observer) -> dict[str, object]:
    """Submit, fault, heal, wait, then check the promises (module docstring)."""
    sc.submit(2)  # w1's two GPUs (placed at once: w1 is the only node)
    sc.wait_placed(2)
    sc.cluster.start_worker("w2", "4")  # direct: the healthy node where re-queued attempts go
    sc.wait_running(2)
    sc.cluster.wait_nodes(2, timeout=60)
    assert sc.proxy is not None
    fault.apply(sc.cluster, sc.proxy)
    time.sleep(fault.hold_s / 2)
    if not fault.master_down:
        sc.submit(1)  # acknowledged while the fault holds
    time.sleep(fault.hold_s / 2)
    fault.heal(sc.cluster, sc.proxy)
    healed = time.monotonic()
    if fault.master_down:
        sc.submit(1)
    try:
        jobs = sc.wait_done(timeout=90)
    finally:  # a double run is reported even when the jobs also got stuck
        observer.stop()
        bad = overlaps(sc.out)
        assert not bad, "attempts overlapped:\n" + "\n".join(bad) + "\n" + sc.cluster.logs()
    recovered = time.monotonic() - healed
    longest = observer.longest_assigned()
    assert longest <= ASSIGNED_BOUND_S, f"an attempt stayed ASSIGNED {longest:.1f} s\n{sc.cluster.logs()}"
    assert sc.node_states() == {"NODE_STATE_READY"}, sc.cluster.logs()
    runs = intervals(sc.out)
    assert set(runs) == set(jobs), "every acknowledged job ran"
    return {
        "fault": fault.name,
        "jobs": len(jobs),
        "attempts": sum(len(v) for v in runs.values()),
        "longest_assigned_s": round(longest, 2),
        "recovered_s": round(recovered, 2),
        "min_gap_between_attempts_s": min_gap(sc.out),
    }
