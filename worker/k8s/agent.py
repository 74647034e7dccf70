"""``horus-worker --kubernetes``: the node agent's shell. It follows its node's pods on the
apiserver, reads the GPUs, maps GPU processes to pods through their cgroups, evicts pods over
their GPU memory cap, and writes the node report ConfigMap for horus-k8s every interval.

Three loops share one :class:`worker.k8s.book.NodeBook` (the decisions): the pod watch (list,
then watch from its resourceVersion; a 410 or a broken stream lists again), the memory watchdog
(every ``watch_s``: NVML's per-process memory) and the report (every ``interval_s``: the GPUs'
readings, each pod's use and progress, the memory events). Blocking reads (/proc, progress and
log files) run in threads; no failed call ends a loop: it is logged and the next turn tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from horus_core.k8sreport import NodeReport, render_report
from horus_core.kubeapi import JsonObj, KubeError, sleep_or
from horus_core.model import JobSpec
from worker.gpu.base import GpuInfo, GpuProbe, ProbeTarget, ProcessReading
from worker.k8s.book import Announce, Effect, Evict, NodeBook, Progress
from worker.k8s.cgroup import PodResolver
from worker.k8s.nodeapi import NodeApi
from worker.k8s.pods import NodePod, Termination, node_pod
from worker.sharing.oom import is_oom, read_tail
from worker.sharing.watchdog import DEFAULT_SLACK_MIB
from worker.tails import ProgressTail

log = logging.getLogger(__name__)
PROGRESS_FILE = "progress.jsonl"
_SIM_PID = 1 << 31  # beyond any real PID (pid_max is at most 2**22)
_UID = re.compile(r"^[0-9a-f-]{32,36}$")


@dataclass(frozen=True)
class NodeAgentConfig:
    node: str
    namespace: str = "horus-system"
    interval_s: float = 15.0
    watch_s: float = 0.5
    slack_mib: int = DEFAULT_SLACK_MIB
    proc_root: pathlib.Path = pathlib.Path("/proc")
    progress_dir: pathlib.Path = pathlib.Path("/var/run/horus/progress")
    pod_logs: pathlib.Path | None = pathlib.Path("/var/log/pods")
    simulated: bool = False  # the probe is SimulatedProbe: give it the pods as targets


class NodeAgent:
    def __init__(
        self,
        config: NodeAgentConfig,
        api: NodeApi,
        probe: GpuProbe,
        gpus: Sequence[GpuInfo],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config, self.api, self.probe, self.clock = config, api, probe, clock
        self.book = NodeBook(gpus, config.slack_mib)
        self.synced = asyncio.Event()  # the first list of the node's pods is in
        self.reports = 0  # reports written
        self._tails: dict[str, ProgressTail] = {}
        self._progress: dict[str, Progress] = {}
        self._sim_pids: dict[str, int] = {}
        self._next_sim = _SIM_PID

    async def run(self, stop: asyncio.Event) -> None:
        loops = [self._pods_loop(), self._watchdog_loop(stop), self._report_loop(stop)]
        tasks = [asyncio.ensure_future(c) for c in loops]
        try:
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    # ------------------------------------------------------------------ pods

    async def _pods_loop(self) -> None:
        backoff = 0.5
        while True:
            try:
                items, rv = await self.api.list_pods()
                await self._relist(items)
                backoff = 0.5
                while rv:
                    rv = await self._follow(rv)
            except Exception as exc:  # the apiserver, the network, a bad answer: list again
                log.warning("pods of node %s: %s; listing again in %.1f s", self.config.node, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(10.0, backoff * 2)

    async def _relist(self, items: list[JsonObj]) -> None:
        seen = set()
        for obj in items:
            pod = node_pod(obj)
            if pod is not None:
                seen.add(pod.uid)
                await self._pod(pod)
        for uid in set(self.book.pods) - seen:
            self._gone(uid)
        self.synced.set()
        await asyncio.to_thread(self._sweep, set(self.book.pods))

    async def _follow(self, rv: str) -> str:
        """One watch from ``rv``; the resourceVersion to go on from ("" = list again)."""
        async for event in self.api.watch_pods(rv):
            kind, obj = event.get("type"), event.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":
                log.info("pod watch: %s; listing again", obj.get("message", obj))
                return ""
            rv = str(obj.get("metadata", {}).get("resourceVersion") or rv)
            pod = node_pod(obj) if kind != "BOOKMARK" else None
            if pod is not None and kind == "DELETED":
                self._gone(pod.uid)
                await asyncio.to_thread(self._sweep, set(self.book.pods))
            elif pod is not None:
                await self._pod(pod)
        return rv

    async def _pod(self, pod: NodePod) -> None:
        known = self.book.pods.get(pod.uid)
        if pod.problems and (known is None or known.problems != pod.problems):
            log.warning("pod %s/%s: %s", pod.namespace, pod.name, "; ".join(pod.problems))
        for run in self.book.pod_seen(pod):
            oom = await asyncio.to_thread(self._was_oom, pod, run)
            await self._carry_out(self.book.ended(pod.uid, run, oom, self.clock()))

    def _gone(self, uid: str) -> None:
        self.book.pod_gone(uid)
        self._tails.pop(uid, None)
        self._progress.pop(uid, None)
        self._sim_pids.pop(uid, None)

    def _was_oom(self, pod: NodePod, run: Termination) -> bool:
        """Blocking: CUDA's out-of-memory error in the run's termination message or its log tail."""
        text = run.message.encode()
        if self.config.pod_logs is not None:
            d = self.config.pod_logs / f"{pod.namespace}_{pod.name}_{pod.uid}" / run.container
            text += b"\n" + read_tail(d / f"{run.run}.log")
        return is_oom(run.exit_code, text)

    def _sweep(self, live: set[str]) -> None:
        """Blocking: the progress directories of pods no longer on the node are removed."""
        with contextlib.suppress(OSError):
            for d in self.config.progress_dir.iterdir():
                if _UID.match(d.name) and d.name not in live and d.is_dir() and not d.is_symlink():
                    shutil.rmtree(d, ignore_errors=True)

    # ------------------------------------------------------------------ the watchdog

    async def _watchdog_loop(self, stop: asyncio.Event) -> None:
        await self.synced.wait()
        while not await sleep_or(stop, self.config.watch_s):
            try:
                await self.check_memory()
            except Exception as exc:
                log.warning("GPU memory watchdog: %s", exc)

    async def check_memory(self) -> None:
        """One watchdog reading: the pods above their cap are evicted."""
        targets = self._targets()
        readings = await self.probe.memory(targets)
        owner = await asyncio.to_thread(self._owners, readings)
        await self._carry_out(self.book.memory(readings, owner, self.clock()))

    def _targets(self) -> list[ProbeTarget]:
        """For simulated GPUs only: the live pods the scheduler gave GPUs (horus.io/gpus)."""
        if not self.config.simulated:
            return []
        by_index = {str(g.index): g.uuid for g in self.book.gpus}
        out = []
        for pod in self.book.pods.values():
            gpus = tuple(by_index.get(g, g) for g in pod.gpus if by_index.get(g, g) in by_index.values())
            if gpus and not (pod.finished or pod.deleting):
                pid = self._sim_pids.get(pod.uid) or self._new_sim_pid(pod.uid)
                spec = JobSpec(command=("pod",), job_type=pod.job_type, gpu_memory_mib=pod.cap.mib)
                out.append(ProbeTarget(pod.uid, 0, (pid,), gpus, spec))
        return out

    def _new_sim_pid(self, uid: str) -> int:
        self._next_sim += 1
        self._sim_pids[uid] = self._next_sim
        return self._next_sim

    def _owners(self, readings: Sequence[ProcessReading]) -> dict[int, str]:
        """Blocking: PID -> pod UID, through the cgroups (or the simulated targets' PIDs)."""
        sim = {pid: uid for uid, pid in self._sim_pids.items()}
        resolver = PodResolver(self.config.proc_root)
        out: dict[int, str] = {}
        for r in readings:
            uid = sim.get(r.pid) or self.book.uid_of(resolver.pod_of(r.pid) or "")
            if uid is not None:
                out[r.pid] = uid
        return out

    async def _carry_out(self, effects: list[Effect]) -> None:
        for e in effects:
            where = f"pod {e.pod.namespace}/{e.pod.name}"
            try:
                if isinstance(e, Evict):
                    log.warning("%s: evicting: %s", where, e.message)
                    await self._evict(e)
                elif isinstance(e, Announce):
                    await self.api.event(e.pod, e.reason, e.message)
            except Exception as exc:
                log.error("%s: %s failed: %s", where, type(e).__name__.lower(), exc)

    async def _evict(self, e: Evict) -> None:
        try:
            await self.api.evict(e.pod)
        except KubeError as exc:
            gone = exc.status == 404
            self.book.evicted(e.pod.uid, gone, self.clock())
            if not gone:
                raise
            return
        self.book.evicted(e.pod.uid, True, self.clock())

    # ------------------------------------------------------------------ the report

    async def _report_loop(self, stop: asyncio.Event) -> None:
        await self.synced.wait()
        while True:
            try:
                await self.report()
            except Exception as exc:
                log.warning("node report: %s", exc)
            if await sleep_or(stop, self.config.interval_s):
                return

    async def report(self) -> NodeReport:
        """Read the GPUs and the pods' progress, and write the report ConfigMap."""
        gpus, readings = await self.probe.read(self._targets())
        owner = await asyncio.to_thread(self._owners, readings)
        await asyncio.to_thread(self._read_progress)
        got_gpus, pods = self.book.readings(gpus, readings, owner, self._progress)
        report = NodeReport(
            self.config.node, self.clock(), self.config.interval_s, got_gpus, pods, tuple(self.book.events)
        )
        await self.api.put_report(render_report(report))
        self.reports += 1
        return report

    def _read_progress(self) -> None:
        """Blocking: the latest record of each live pod's progress file."""
        for uid, pod in list(self.book.pods.items()):
            if pod.finished:
                continue
            tail = self._tails.setdefault(uid, ProgressTail(self.config.progress_dir / uid / PROGRESS_FILE))
            latest = tail.read()
            if latest is not None and latest.step >= 0 and latest.samples_per_s >= 0:
                rate = min(latest.samples_per_s, 1e12) or None  # 0: the job gave none
                self._progress[uid] = Progress(min(latest.step, 1 << 62), rate)
