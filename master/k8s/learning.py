"""The node agents' reports (horus_core.k8sreport, ConfigMaps ``horus-node-<node>``) fed to the
master's learner, as the master feeds it its workers' heartbeats: each pod's GPU use is its job's
reading on those GPUs, its samples/s a progress report filed under what shared its GPUs then
(the placements horus-k8s knows), and a job gone from the apiserver an attempt that ended (its
profile and pair speeds stored in ``--db``). A report that does not parse, is stale or was
already read is skipped: a node never breaks a pass. A pod's attempt is 1 (a pod runs once; a
new pod of the same name is a new job of the same id)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from horus_core.k8s.world import World
from horus_core.k8sreport import DATA_KEY, NodeReport, is_stale, parse_report
from horus_core.model import Job
from horus_core.plane import AttemptProgress, Heartbeat, JobGpuReading
from master.learning.learner import Learner

log = logging.getLogger("horus.k8s")
ATTEMPT = 1


class ReportFeed:
    def __init__(self, learner: Learner) -> None:
        self.learner = learner
        self._read: dict[str, float] = {}  # node -> the time of the report read last
        self._live: dict[str, Job] = {}  # the active jobs of the last pass
        self.fed = 0  # reports fed (what a test and the log read)

    def feed(self, world: World, configmaps: Iterable[dict[str, Any]], now: float) -> None:
        for cm in configmaps:
            try:
                report = parse_report(str((cm.get("data") or {}).get(DATA_KEY, "")))
            except ValueError as exc:
                name = (cm.get("metadata") or {}).get("name")
                log.debug("node report %s skipped: %s", name, exc)
                continue
            if is_stale(report, now) or self._read.get(report.node) == report.time:
                continue
            self._read[report.node] = report.time
            if report.node in world.facts:
                self._one(world, report)
                self.fed += 1

    def _one(self, world: World, report: NodeReport) -> None:
        node = world.facts[report.node].node
        ours = {g.uuid: node.gpus[g.index].uuid for g in report.gpus if 0 <= g.index < len(node.gpus)}
        by_uid = {a.uid: u.job for u in world.units.values() if u.job.state.active for a in u.pods}
        jobs = [j for j in world.snapshot.active() if report.node in (j.nodes or (j.node,))]
        readings, running, progress = [], [], []
        for p in report.pods:
            job = by_uid.get(p.uid)
            if job is None:
                continue
            running.append((job.id, ATTEMPT))
            readings += [
                JobGpuReading(job.id, ATTEMPT, ours[g], p.util, p.mem_used_mib) for g in p.gpus if g in ours
            ]
            if p.samples_per_s is not None and p.step is not None:
                progress.append(AttemptProgress(job.id, ATTEMPT, p.step, 0.0, p.samples_per_s, report.time))
        types = {g.uuid: g.gpu_type for g in node.gpus}
        self.learner.on_heartbeat(report.node, Heartbeat(jobs=tuple(readings), running=tuple(running)))
        self.learner.on_placement(report.node, jobs, running, types)
        for pr in progress:
            self.learner.on_progress(report.node, pr)

    async def ended(self, world: World) -> None:
        """The jobs active at the last pass and gone now: their attempts ended (stored)."""
        live = {j.id: j for j in world.snapshot.active()}
        for jid, job in self._live.items():
            if jid not in live:
                await self.learner.attempt_ended(job, ATTEMPT)
        self._live = live
