"""horus-k8s's loop: the mirrored nodes and pods -> the world (horus_core.k8s.world) -> the
policy's ``decide(snapshot, now)`` (off the loop) -> the apiserver.

A pass runs when a watch brings a change (coalesced) and every ``tick_s``. It first finishes the
plans a previous run wrote and did not bind (never decided twice), tells refused and held pods
why, then applies the policy's checked actions: an Assign binds a single pod with its plan on
the Binding (the apiserver writes it on the pod), a gang's pods with their plans written first
(all of them, or, if a plan cannot be written, none); a Preempt evicts the job's pods
(a 429 from a PodDisruptionBudget: it waits, said in an Event); a Wait whose reason changed is
written as the pod's condition and an Event. What this process wrote is put in the mirror at
once, so the next pass never places a pod it already placed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from horus_core import reasoncodes as rc
from horus_core.k8s import actions as act
from horus_core.k8s.pods import PodAsk
from horus_core.k8s.world import AskMemo, World, build
from horus_core.k8sreport import LABEL_NODE_REPORT
from horus_core.kubeapi import JsonObj, Kube, KubeError, sleep_or
from horus_core.model import Action, Assign, Preempt
from horus_core.policies import Policy
from horus_core.policies.checks import check_actions
from horus_core.queues import QueueConfig
from master.k8s.learning import ReportFeed
from master.k8s.mirror import Mirror

log = logging.getLogger("horus.k8s")
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
PARALLEL = 32  # jobs whose writes are in flight at once (the ports and requests: computed before)


@dataclass
class Stats:
    passes: int = 0
    bound: int = 0
    evicted: int = 0
    waits: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)


def _pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}" + (f"/{sub}" if sub else "")


class K8sScheduler:
    def __init__(
        self,
        kube: Kube,
        policy: Policy,
        *,
        name: str = "horus",
        queues: QueueConfig | None = None,
        tick_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        feed: ReportFeed | None = None,
        namespace: str = "horus-system",
    ) -> None:
        self.kube, self.policy, self.name, self.queues = kube, policy, name, queues
        self.tick_s, self.clock = tick_s, clock
        self.changed = asyncio.Event()
        self.nodes = Mirror(kube, "/api/v1/nodes", self.changed)
        self.pods = Mirror(kube, "/api/v1/pods", self.changed, "status.phase!=Succeeded,status.phase!=Failed")
        self.groups = Mirror(kube, PODGROUPS, self.changed)
        self.feed = feed  # the node reports -> the learner (None: not learning)
        reports = f"/api/v1/namespaces/{namespace}/configmaps"  # (a report wakes no pass)
        self.reports = Mirror(kube, reports, asyncio.Event(), labels="=".join(LABEL_NODE_REPORT))
        self.stats = Stats()
        self._told: dict[str, tuple[str, str]] = {}  # pod uid -> (reason, message) written
        self._blocked: set[str] = set()  # pods whose eviction a PodDisruptionBudget refused (told once)
        self._asks: AskMemo = {}  # pods read in earlier passes
        self._evicted: set[str] = set()  # pods evicted (terminating until the kubelet ends them)

    async def run(self, stop: asyncio.Event) -> None:
        watched = (self.nodes, self.pods, self.groups) + ((self.reports,) if self.feed else ())
        mirrors = [asyncio.create_task(m.run(stop)) for m in watched]
        try:
            for m in (self.nodes, self.pods, self.groups):
                await m.synced.wait()
            while not stop.is_set():
                self.changed.clear()
                try:
                    await self.run_once()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # (a pass never kills the daemon: the next one retries)
                    log.exception("scheduling pass failed; the next one retries")
                    self.stats.errors.append(str(exc))
                await _wait_any(stop, self.changed, self.tick_s)
                await asyncio.sleep(0.05)  # (coalesce a burst of watch events into one pass)
        finally:
            for t in mirrors:
                t.cancel()
            await asyncio.gather(*mirrors, return_exceptions=True)

    def world(self) -> World:
        groups = {
            k: int(((g.get("spec") or {}).get("minMember")) or 0)
            for k, g in self.groups.objects.items()
            if isinstance((g.get("spec") or {}).get("minMember"), int)
        }
        return build(
            self.nodes.objects.values(), list(self.pods.objects.values()), self.name, self.queues, groups
        )

    async def run_once(self) -> None:
        now = self.clock()
        world = self.world()
        self.stats.passes += 1
        self._forget()
        if self.feed is not None:
            await self._learn(world, now)
        await self._resume(world)
        for r in world.refused:
            await self._tell(r.namespace, r.name, r.uid, act.CONDITION_REASON_INVALID, f"{r.error}", now)
            self.stats.refused += 1
        for wait, pods in world.held:
            await self._tell_pods(pods, wait.code or rc.RESOURCES, wait.reason, now)
        if not world.snapshot.pending():
            return
        actions = await asyncio.to_thread(self._decide, world, now)
        plan = check_actions(world.snapshot, actions)
        for why in plan.dropped:
            log.warning("dropped %s: %s", why[0], why[1])
        for p in plan.preempts:
            await self._evict(world, p, now)
        ports: set[int] = set()
        todo = [self._assign(world, a, now, ports) for a in plan.assigns]
        todo += [
            self._tell_pods(world.units[w.job_id].pods, w.code or rc.RESOURCES, w.reason, now)
            for w in plan.waits
        ]
        await self._all(todo)

    async def _all(self, calls: Sequence[Coroutine[Any, Any, None]]) -> None:
        """Run ``calls`` (each one job's writes, in order) at most ``PARALLEL`` at a time."""
        gate = asyncio.Semaphore(PARALLEL)

        async def one(call: Coroutine[Any, Any, None]) -> None:
            async with gate:
                await call

        await asyncio.gather(*(one(c) for c in calls))

    def _forget(self) -> None:
        """What was written about pods that are gone (the records stay as small as the cluster)."""
        if len(self._told) + len(self._blocked) + len(self._evicted) < 2 * len(self.pods.objects) + 1024:
            return
        live = {str((p.get("metadata") or {}).get("uid")) for p in self.pods.objects.values()}
        self._told = {u: w for u, w in self._told.items() if u in live}
        self._blocked &= live
        self._evicted &= live
        del self.stats.errors[:-100]

    async def _learn(self, world: World, now: float) -> None:
        """What the node reports measured, into the model before the policy runs (it is not
        running now); ended attempts and running ones stored now and then."""
        assert self.feed is not None
        self.feed.feed(world, list(self.reports.objects.values()), now)
        await self.feed.ended(world)
        await self.feed.learner.checkpoint()
        self.feed.learner.apply_observations()

    def _decide(self, world: World, now: float) -> list[Action]:
        s = world.snapshot
        withheld = rc.out_of_service([n for n in s.nodes if n.state.value != "READY"], s.active())
        actions = self.policy.decide(s, now)
        return rc.classify(actions, s.pending(), withheld) if withheld.any else actions

    async def _assign(self, world: World, a: Assign, now: float, ports: set[int]) -> None:
        placed = act.placements(world, a, now, ports)
        unit = world.units[a.job_id]
        if isinstance(placed, str):
            await self._tell_pods(unit.pods, rc.RESOURCES, placed, now)
            return
        act.reserve(world, a.job_id, placed)
        port = next((p.annotations.get(act.ENV_PREFIX + "MASTER_PORT") for p in placed), None)
        if port:
            ports.add(int(port))
        if len(placed) == 1:  # (one pod: the plan rides on its Binding)
            p = placed[0]
            await self._bind(p.namespace, p.name, p.uid, p.node, now, p.annotations)
            return
        written: list[act.Placement] = []
        for p in placed:  # a gang: the plan on every pod first, a restart finishes it
            try:
                obj = await self.kube.patch(_pod_path(p.namespace, p.name), p.patch())
            except KubeError as exc:
                log.warning("cannot write the plan on %s/%s: %s; the job waits", p.namespace, p.name, exc)
                await self._unplan(written)
                return
            self.pods.update(obj)
            written.append(p)
        for p in placed:
            await self._bind(p.namespace, p.name, p.uid, p.node, now)

    async def _unplan(self, written: Sequence[act.Placement]) -> None:
        for p in written:
            undo = {"metadata": {"annotations": dict.fromkeys(p.annotations)}}
            try:
                self.pods.update(await self.kube.patch(_pod_path(p.namespace, p.name), undo))
            except KubeError as exc:
                log.warning("cannot clear the plan on %s/%s: %s", p.namespace, p.name, exc)

    async def _bind(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        now: float,
        plan: Mapping[str, str] | None = None,
    ) -> None:
        path = _pod_path(namespace, name, "binding")
        try:
            await self.kube.request("POST", path, act.binding(name, uid, node, plan))
        except KubeError as exc:
            if exc.status == 409:  # (bound already: by this plan before a restart)
                return
            log.warning("cannot bind %s/%s to %s: %s", namespace, name, node, exc)
            return
        self.stats.bound += 1
        key = f"{namespace}/{name}"
        obj = self.pods.objects.get(key)
        if obj is not None:  # (bound: the next pass sees it placed before the watch says so)
            self.pods.objects[key] = bound_copy(obj, node, plan)
        msg = f"Successfully assigned {key} to {node}"
        await self._event(namespace, name, uid, "Scheduled", msg, now, warning=False)

    async def _resume(self, world: World) -> None:
        """Bind the pods whose plan a previous pass (or run) wrote and did not bind."""
        for ask in world.resume:
            assert ask.planned is not None
            if ask.planned[0] in world.facts:
                await self._bind(ask.namespace, ask.name, ask.uid, ask.planned[0], self.clock())

    async def _evict(self, world: World, p: Preempt, now: float) -> None:
        for ask in world.units[p.job_id].pods:
            if ask.uid in self._evicted:
                continue
            path = _pod_path(ask.namespace, ask.name, "eviction")
            try:
                await self.kube.request("POST", path, act.eviction(ask.namespace, ask.name))
            except KubeError as exc:
                if exc.status == 429 and ask.uid not in self._blocked:
                    self._blocked.add(ask.uid)
                    why = f"Horus would evict it ({p.reason}); a PodDisruptionBudget forbids it: "
                    why += exc.message
                    await self._event(ask.namespace, ask.name, ask.uid, "EvictionBlocked", why, now)
                elif exc.status not in (404, 429):
                    log.warning("cannot evict %s: %s", ask.key, exc)
                continue
            self.stats.evicted += 1
            self._evicted.add(ask.uid)
            await self._event(
                ask.namespace, ask.name, ask.uid, "Preempted", f"Evicted by Horus: {p.reason}", now
            )

    async def _tell_pods(self, pods: Sequence[PodAsk], code: str, reason: str, now: float) -> None:
        for ask in pods:
            if ask.waiting == (code, reason):  # (written already, by this run or one before)
                self._told[ask.uid] = ask.waiting
                continue
            await self._tell(ask.namespace, ask.name, ask.uid, code, reason, now)

    async def _tell(self, namespace: str, name: str, uid: str, code: str, reason: str, now: float) -> None:
        """The pod's PodScheduled=False condition and a FailedScheduling Event, once per change."""
        if self._told.get(uid) == (code, reason):
            return
        self._told[uid] = (code, reason)
        self.stats.waits += 1
        try:
            obj = await self.kube.patch(
                _pod_path(namespace, name, "status"), act.condition(code, reason, now), strategic=True
            )
            self.pods.update(obj)
        except KubeError as exc:
            log.warning("cannot write the condition of %s/%s: %s", namespace, name, exc)
        await self._event(namespace, name, uid, "FailedScheduling", f"{code}: {reason}", now)

    async def _event(
        self, namespace: str, name: str, uid: str, reason: str, message: str, now: float, warning: bool = True
    ) -> None:
        body: JsonObj = act.event(namespace, name, uid, reason, message, self.name, now, warning)
        try:
            await self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events", body)
        except KubeError as exc:
            log.warning("cannot write an event on %s/%s: %s", namespace, name, exc)


def bound_copy(obj: JsonObj, node: str, plan: Mapping[str, str] | None) -> JsonObj:
    """``obj`` as the apiserver has it once bound (with ``plan``'s annotations), under a version
    of its own (what was read of it is read again)."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = dict(meta.get("annotations") or {}) | dict(plan or {})
    meta["resourceVersion"] = f"{meta.get('resourceVersion', '')}+bound"
    return obj | {"metadata": meta, "spec": dict(obj.get("spec") or {}) | {"nodeName": node}}


async def _wait_any(stop: asyncio.Event, changed: asyncio.Event, within_s: float) -> None:
    if changed.is_set() or stop.is_set():
        return
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(changed.wait())]
    try:
        await asyncio.wait(waits, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


__all__ = ["K8sScheduler", "Stats", "sleep_or"]
