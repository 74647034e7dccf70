"""kube-scheduler's extender verbs (``filter``, ``prioritize``, ``bind``) over Horus's placement,
pure: for clusters that keep kube-scheduler and call ``horus-k8s --extender`` for GPU pods.

The pod asked about is one pending Horus job in the world of the bound pods (those Horus placed
carry ``horus.io/gpus``; others hold their GPU count), on the candidate nodes kube-scheduler
sends (``nodeCacheCapable``: names only; every other node is left out of the snapshot). The
policy's ``decide(snapshot, now)`` picks one node: the filter passes that node alone and
explains every other one (``FailedNodes``: cordoned, not Ready, GPU type, too few GPUs, CPU or
memory, or "Horus places it on node X"), so ``kubectl describe pod`` says why. ``bind`` decides
again on the node kube-scheduler chose, over the apiserver's state at that moment, so two pods
never get one GPU; the plan annotations are then written and the Binding made (the shell).

JSON: the v1 extender types (k8s.io/kube-scheduler/extender/v1): ExtenderArgs ``Pod``, ``Nodes``,
``NodeNames``; ExtenderFilterResult ``NodeNames``, ``FailedNodes``, ``Error``; HostPriorityList
of ``Host``, ``Score`` (0..10); ExtenderBindingArgs ``PodName``, ``PodNamespace``, ``PodUID``,
``Node``; ExtenderBindingResult ``Error``. Go decodes keys case-insensitively; so does this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from horus_core.errors import InvalidArgument
from horus_core.k8s.actions import Placement, placements
from horus_core.k8s.world import World, build
from horus_core.model import Assign, Job, NodeState, Wait
from horus_core.policies.base import Policy

MAX_SCORE = 10  # the extender API's MaxExtenderPriority


@dataclass(frozen=True)
class Verdict:
    """Where Horus puts one pod among the candidate nodes, and why not elsewhere."""

    job_id: str
    node: str = ""  # "" = nowhere
    placement: Placement | None = None
    failed: dict[str, str] = field(default_factory=dict)  # node -> why not there
    wait: str = ""  # why nowhere

    def filter_result(self, candidates: Sequence[str]) -> dict[str, Any]:
        passed = [n for n in candidates if n == self.node]
        failed = {n: why for n, why in self.failed.items() if n in candidates}
        return {"NodeNames": passed, "FailedNodes": failed, "Error": ""}

    def priorities(self, candidates: Sequence[str]) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": MAX_SCORE if n == self.node else 0} for n in candidates]


def field_of(body: Mapping[str, Any], name: str) -> Any:
    """``body[name]`` matched case-insensitively (as Go's encoding/json reads it)."""
    low = name.lower()
    return next((v for k, v in body.items() if k.lower() == low), None)


def candidates_of(args: Mapping[str, Any]) -> list[str]:
    """The candidate node names of an ExtenderArgs (``NodeNames``, else ``Nodes.items``)."""
    names = field_of(args, "NodeNames")
    if isinstance(names, list):
        return [str(n) for n in names]
    nodes = field_of(args, "Nodes") or {}
    items = field_of(nodes, "items") if isinstance(nodes, dict) else None
    return [str((n.get("metadata") or {}).get("name")) for n in items or [] if isinstance(n, dict)]


def pod_of(args: Mapping[str, Any]) -> dict[str, Any]:
    pod = field_of(args, "Pod")
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise InvalidArgument("Pod", "the extender arguments carry no pod")
    return pod


def world_for(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    pod: Mapping[str, Any],
    scheduler: str,
) -> World:
    """The world of the bound pods and ``pod`` as the one pending pod of ``scheduler``."""
    uid = (pod.get("metadata") or {}).get("uid")
    bound = [
        p
        for p in pods
        if (p.get("spec") or {}).get("nodeName") and (p.get("metadata") or {}).get("uid") != uid
    ]
    asked = dict(pod) | {"spec": dict(pod.get("spec") or {}) | {"schedulerName": scheduler, "nodeName": ""}}
    return build(nodes, [*bound, asked], scheduler)


def verdict(
    world: World, pod: Mapping[str, Any], candidates: Sequence[str], policy: Policy, now: float
) -> Verdict:
    """Horus's choice for ``pod`` among ``candidates`` (its world from :func:`world_for`)."""
    meta = pod.get("metadata") or {}
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    refused = [r for r in world.refused if f"{r.namespace}/{r.name}" == key]
    if refused:
        err = refused[0].error
        return _nowhere(key, candidates, f"bad pod value: {err}")
    job_id = next((jid for jid, u in world.units.items() if any(a.key == key for a in u.pods)), key)
    held = [w for w, _ in world.held if w.job_id == job_id]
    if held:
        return _nowhere(job_id, candidates, held[0].reason)
    allowed = set(candidates)
    nodes = tuple(
        n if n.name in allowed else replace(n, state=NodeState.CORDONED) for n in world.snapshot.nodes
    )
    actions = policy.decide(world.snapshot.with_nodes(nodes), now)
    assign = next((a for a in actions if isinstance(a, Assign) and a.job_id == job_id), None)
    if assign is None:
        wait = next((a for a in actions if isinstance(a, Wait) and a.job_id == job_id), None)
        why = wait.reason if wait is not None else "Horus found no place for it"
        return _explained(world, job_id, candidates, "", why)
    placed = placements(world, assign, now)
    if isinstance(placed, str):
        return _explained(world, job_id, candidates, "", placed)
    if len(placed) != 1:
        return _nowhere(job_id, candidates, "a pod spread over nodes needs horus-k8s as its scheduler")
    out = _explained(world, job_id, candidates, assign.node, f"Horus places it on node {assign.node}")
    return replace(out, placement=placed[0])


def _nowhere(job_id: str, candidates: Sequence[str], why: str) -> Verdict:
    return Verdict(job_id, failed=dict.fromkeys(candidates, why), wait=why)


def _explained(world: World, job_id: str, candidates: Sequence[str], chosen: str, why: str) -> Verdict:
    job = world.units[job_id].job
    failed = {n: why_not(world, n, job) or why for n in candidates if n != chosen}
    return Verdict(job_id, chosen, None, failed, "" if chosen else why)


def why_not(world: World, name: str, job: Job) -> str:
    """Why ``job`` (one pod) cannot run on node ``name`` at all ("" = it could)."""
    facts = world.facts.get(name)
    if facts is None:
        return f"node {name} is unknown to Horus"
    if facts.why:
        return facts.why
    spec, node = job.spec, facts.node
    types = sorted({g.gpu_type for g in node.gpus if g.healthy})
    if spec.gpu_types and not any(spec.accepts_type(t) for t in types):
        have, want = ", ".join(types) or "none", ", ".join(spec.gpu_types)
        return f"node {name} has GPUs of type {have}; the pod accepts {want}"
    usable = [g for g in node.gpus if g.healthy]
    if len(usable) < spec.gpus:
        return f"node {name} has {len(usable)} usable GPUs; the pod asks for {spec.gpus}"
    busy = {u for j in world.snapshot.active() for u in j.gpus}
    idle = sum(1 for g in usable if g.uuid not in busy)
    if spec.exclusive and idle < spec.gpus:
        return f"node {name} has {idle} idle GPUs; the pod asks for {spec.gpus} of its own"
    cpu, memory = world.free(name)
    ask = world.units[job.id].pods[0]
    if ask.cpu > cpu + 1e-9:
        return f"node {name} has {max(cpu, 0):g} cores free; the pod asks for {ask.cpu:g}"
    if ask.memory > memory:
        free, want_mib = max(memory, 0) / 2**20, ask.memory / 2**20
        return f"node {name} has {free:.0f} MiB free; the pod asks for {want_mib:.0f}"
    return ""


def binding_args(body: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(namespace, name, uid, node) of an ExtenderBindingArgs; InvalidArgument naming a missing field."""
    out = []
    for key in ("PodNamespace", "PodName", "PodUID", "Node"):
        value = field_of(body, key)
        if not isinstance(value, str) or (not value and key != "PodUID"):
            raise InvalidArgument(key, f"the binding arguments need {key}")
        out.append(value)
    return out[0], out[1], out[2], out[3]
