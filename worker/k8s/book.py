"""The node agent's pure state: the node's pods, what each uses of which GPU, who shared a GPU
with whom, the memory events, and the effects they call for (evictions, Kubernetes Events).

The shell (:mod:`worker.k8s.agent`) feeds it the pods the apiserver lists, each watchdog reading
(NVML's processes, already mapped PID -> pod UID) and each container run that ended, and carries
out the :class:`Evict` and :class:`Announce` effects it returns. The rules are the worker's
(docs/sharing.md): a pod above its cap plus the slack on a GPU is evicted (``over_cap``); a
container that ended with CUDA's out-of-memory error is reported (``oom``) with whether it shared
a GPU and whether a neighbour was over its cap meanwhile, and, where containment would run it
again alone (it shared, no neighbour was over its cap), evicted so that the kubelet does not
restart it in place beside the same neighbours. No clock: every call is given ``now``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from horus_core.caps import format_mib
from horus_core.containment import CAUSE_CUDA_OOM, CAUSE_GPU_MEMORY_EXCEEDED
from horus_core.k8sreport import EVENT_OOM, EVENT_OVER_CAP, GpuReadingK8s, PodEvent, PodReading
from worker.gpu.base import GpuInfo, GpuReading, ProcessReading
from worker.k8s.pods import NodePod, Termination
from worker.sharing.watchdog import DEFAULT_SLACK_MIB, MemoryCap, breaches, usage

MAX_EVENTS = 64  # kept for the reports (the newest)
RETRY_S = 5.0  # an eviction the apiserver refused is asked again after this


@dataclass(frozen=True, slots=True)
class Evict:
    pod: NodePod
    reason: str  # CAUSE_* (the Event's reason)
    message: str


@dataclass(frozen=True, slots=True)
class Announce:
    """A Kubernetes Event on the pod (type Warning)."""

    pod: NodePod
    reason: str
    message: str


Effect = Evict | Announce


@dataclass(frozen=True, slots=True)
class Progress:
    step: int
    samples_per_s: float | None


class NodeBook:
    def __init__(self, gpus: Sequence[GpuInfo], slack_mib: int = DEFAULT_SLACK_MIB) -> None:
        self.gpus = list(gpus)
        self._by_index = {str(g.index): g.uuid for g in gpus}
        self._total = {g.uuid: g.memory_mib for g in gpus}
        self.slack_mib = slack_mib
        self.pods: dict[str, NodePod] = {}
        self._hash: dict[str, str] = {}  # static pods: config hash -> uid
        self.peaks: dict[str, int] = {}
        self.shared: set[str] = set()
        self.witnessed: set[str] = set()  # saw a neighbour above its cap on a GPU it used
        self.events: deque[PodEvent] = deque(maxlen=MAX_EVENTS)
        self._evict: dict[str, tuple[Evict, float]] = {}  # wanted, with the last try's time
        self._judged: set[tuple[str, str, int]] = set()  # (uid, container, run) already seen ended

    # ------------------------------------------------------------------ pods

    def pod_seen(self, pod: NodePod) -> list[Termination]:
        """A pod listed or changed: kept; the container runs that ended non-zero and were not
        judged yet are returned (the shell reads their log tails, then calls :meth:`ended`)."""
        self.pods[pod.uid] = pod
        if pod.config_hash:
            self._hash[pod.config_hash] = pod.uid
        if pod.deleting or pod.finished:
            self._evict.pop(pod.uid, None)
        return [
            t for t in pod.ended if t.exit_code != 0 and (pod.uid, t.container, t.run) not in self._judged
        ]

    def pod_gone(self, uid: str) -> None:
        pod = self.pods.pop(uid, None)
        if pod is not None and pod.config_hash:
            self._hash.pop(pod.config_hash, None)
        for store in (self.peaks, self._evict):
            store.pop(uid, None)
        self.shared.discard(uid)
        self.witnessed.discard(uid)
        self._judged = {j for j in self._judged if j[0] != uid}

    def uid_of(self, cgroup_uid: str) -> str | None:
        """The API's pod UID for a UID read from a cgroup (a static pod's is its config hash)."""
        if cgroup_uid in self.pods:
            return cgroup_uid
        return self._hash.get(cgroup_uid.replace("-", ""))

    def ended(self, uid: str, run: Termination, oom: bool, now: float) -> list[Effect]:
        """A container run of ``uid`` ended non-zero; ``oom``: with CUDA's out-of-memory error."""
        self._judged.add((uid, run.container, run.run))
        pod = self.pods.get(uid)
        if pod is None or not oom:
            return []
        shared, over = uid in self.shared, uid in self.witnessed
        peak = self.peaks.get(uid, 0)
        cap = pod.cap.on(min(self._total.values(), default=0))
        if over:
            how = "a pod sharing its GPU was over its own cap: a neighbour grew"
        elif shared:
            how = "it shared a GPU and no neighbour was over its cap: it runs again alone"
        else:
            how = "it had its GPUs to itself"
        detail = (
            f"{CAUSE_CUDA_OOM}: container {run.container} (run {run.run}) ran out of GPU memory "
            f"at {format_mib(peak)} (cap {format_mib(cap) if cap else 'none'}); {how}"
        )
        self.events.append(PodEvent(uid, EVENT_OOM, now, "", peak, cap, detail[:1024], shared, over))
        effects: list[Effect] = [Announce(pod, CAUSE_CUDA_OOM, detail)]
        if shared and not over and not (pod.finished or pod.deleting):
            effects.append(self._want(Evict(pod, CAUSE_CUDA_OOM, detail), now))
        return effects

    # ------------------------------------------------------------------ the watchdog

    def memory(
        self, readings: Sequence[ProcessReading], owner: Mapping[int, str], now: float
    ) -> list[Effect]:
        """One reading of the GPU processes (``owner``: PID -> pod UID): peaks, sharing, and the
        pods above their cap plus slack evicted (an eviction not yet done is asked again)."""
        caps = self._caps(owner)
        used = usage(caps, readings)
        self._observe(used)
        effects: list[Effect] = []
        for b in breaches(caps, readings, self.slack_mib):
            uid = b.cap.job_id
            for other, per_gpu in used.items():
                if other[0] != uid and b.gpu_uuid in per_gpu:
                    self.witnessed.add(other[0])
            pod = self.pods[uid]
            if uid not in self._evict and not (pod.deleting or pod.finished):
                effects += self._over_cap(pod, b.gpu_uuid, b.used_mib, b.cap.cap_mib, now)
        return effects + self._retries(now)

    def evicted(self, uid: str, ok: bool, now: float) -> None:
        """The shell's answer to an :class:`Evict`: done (``ok``), or to be asked again later."""
        if uid in self._evict:
            if ok:
                self._evict[uid] = (self._evict[uid][0], float("inf"))
            else:
                self._evict[uid] = (self._evict[uid][0], now)

    def _caps(self, owner: Mapping[int, str]) -> list[MemoryCap]:
        pids: dict[str, list[int]] = {}
        for pid, uid in owner.items():
            if uid in self.pods:
                pids.setdefault(uid, []).append(pid)
        least = min(self._total.values(), default=0)
        return [MemoryCap(uid, 0, tuple(p), self.pods[uid].cap.on(least)) for uid, p in pids.items()]

    def _observe(self, used: Mapping[tuple[str, int], Mapping[str, int]]) -> None:
        on: dict[str, set[str]] = {}
        for (uid, _), per_gpu in used.items():
            self.peaks[uid] = max(self.peaks.get(uid, 0), max(per_gpu.values(), default=0))
            for gpu in per_gpu:
                on.setdefault(gpu, set()).add(uid)
        for pod in self.pods.values():  # the GPUs the scheduler gave it (horus.io/gpus)
            for g in pod.gpus:
                if not (pod.finished or pod.deleting):
                    on.setdefault(self._by_index.get(g, g), set()).add(pod.uid)
        for uids in on.values():
            if len(uids) > 1:
                self.shared.update(uids)

    def _over_cap(self, pod: NodePod, gpu: str, used: int, cap: int, now: float) -> list[Effect]:
        detail = (
            f"{CAUSE_GPU_MEMORY_EXCEEDED}: used {format_mib(used)} of GPU memory on {gpu}, above its "
            f"cap {format_mib(cap)} (+{self.slack_mib} MiB slack, from {pod.cap.source})"
        )
        shared, over = pod.uid in self.shared, pod.uid in self.witnessed
        self.events.append(
            PodEvent(pod.uid, EVENT_OVER_CAP, now, gpu, used, cap, detail[:1024], shared, over)
        )
        return [
            self._want(Evict(pod, CAUSE_GPU_MEMORY_EXCEEDED, detail), now),
            Announce(pod, CAUSE_GPU_MEMORY_EXCEEDED, detail),
        ]

    def _want(self, evict: Evict, now: float) -> Evict:
        self._evict[evict.pod.uid] = (evict, now)
        return evict

    def _retries(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for uid, (evict, last) in list(self._evict.items()):
            pod = self.pods.get(uid, evict.pod)
            if last != float("inf") and now - last >= RETRY_S and not (pod.deleting or pod.finished):
                out.append(self._want(Evict(pod, evict.reason, evict.message), now))
        return out

    # ------------------------------------------------------------------ the report

    def readings(
        self,
        gpus: Iterable[GpuReading],
        readings: Sequence[ProcessReading],
        owner: Mapping[int, str],
        progress: Mapping[str, Progress],
    ) -> tuple[tuple[GpuReadingK8s, ...], tuple[PodReading, ...]]:
        """The report's GPUs and pods: every pod seen on a GPU or with progress."""
        info = {g.uuid: g for g in self.gpus}
        out_gpus = tuple(
            GpuReadingK8s(
                r.uuid,
                info[r.uuid].index,
                info[r.uuid].model,
                _pct(r.util_sm),
                r.mem_used_mib,
                r.mem_total_mib,
            )
            for r in gpus
            if r.uuid in info
        )
        known = {g.uuid for g in out_gpus}
        mem: dict[str, dict[str, int]] = {}
        util: dict[str, dict[str, float]] = {}
        for r in readings:
            uid = owner.get(r.pid, "")
            if uid in self.pods and r.gpu_uuid in known:
                mem.setdefault(uid, {})[r.gpu_uuid] = mem.get(uid, {}).get(r.gpu_uuid, 0) + max(
                    0, r.mem_used_mib
                )
                u = util.setdefault(uid, {})
                u[r.gpu_uuid] = min(100.0, u.get(r.gpu_uuid, 0.0) + _pct(r.util_sm or 0.0))
        pods = []
        for uid in sorted(set(mem) | {u for u in progress if u in self.pods}):
            pod, per_gpu, per_util = self.pods[uid], mem.get(uid, {}), util.get(uid, {})
            p = progress.get(uid)
            pods.append(
                PodReading(
                    uid,
                    pod.namespace,
                    pod.name,
                    tuple(sorted(per_gpu)),
                    round(sum(per_util.values()) / len(per_util), 2) if per_util else 0.0,
                    max(per_gpu.values(), default=0),
                    p.samples_per_s if p is not None else None,
                    p.step if p is not None else None,
                )
            )
        return out_gpus, tuple(pods)


def _pct(value: float) -> float:
    return min(100.0, max(0.0, float(value)))
