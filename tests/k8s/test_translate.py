"""horus_core.k8s, the pure translation: pods -> job specs, nodes -> Horus nodes, gangs, queues,
and a policy's actions -> what the apiserver is sent. (The daemon's tests run them for real.)"""

from __future__ import annotations

from typing import Any

import pytest

from horus_core.errors import InvalidArgument
from horus_core.k8s import actions
from horus_core.k8s.nodes import node_facts
from horus_core.k8s.pods import pod_ask
from horus_core.k8s.world import build
from horus_core.model import NO_FLOOR, Assign, NodeState
from horus_core.modelcard import card_to_json, packaged_cards
from horus_core.policies import make_policy
from horus_core.queues import parse_config

CARD = next(iter(packaged_cards().values()))


def pod(
    name: str = "p", gpus: object = 1, *, notes: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    limits: dict[str, object] = {"nvidia.com/gpu": gpus} if gpus is not None else {}
    limits |= extra.pop("limits", {})
    spec: dict[str, Any] = {
        "schedulerName": "horus",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"limits": limits, "requests": extra.pop("requests", {})},
            }
        ],
    }
    spec |= extra.pop("spec", {})
    meta = {"name": name, "namespace": extra.pop("namespace", "team-a"), "uid": f"uid-{name}"}
    meta |= {"annotations": notes or {}, "labels": extra.pop("labels", {})}
    meta["creationTimestamp"] = "2024-01-01T00:00:00Z"
    meta["resourceVersion"] = "1"
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def node(name: str, gpus: int = 4, *, labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    lab = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.memory": "40960"}
    return {
        "metadata": {"name": name, "labels": lab | (labels or {}), "annotations": kw.pop("annotations", {})},
        "spec": kw.pop("spec", {}),
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": kw.pop("cpu", "16"), "memory": "64Gi"},
            "conditions": [{"type": "Ready", "status": kw.pop("ready", "True")}],
            "addresses": [{"type": "InternalIP", "address": f"10.0.0.{len(name)}"}],
        },
    }


def test_every_user_field_reaches_the_job_spec() -> None:
    notes = {
        "horus.io/job-type": "ResNet-18 (batch size 32)",
        "horus.io/gpu-memory": "12GiB",
        "horus.io/min-speed": "0.7",
        "horus.io/exclusive": "true",
        "horus.io/model-card": card_to_json(CARD),
    }
    ask = pod_ask(
        pod(
            gpus=2,
            notes=notes,
            spec={"priority": 5, "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
        )
    )
    s = ask.spec
    assert (s.gpus, s.job_type, s.gpu_memory_mib, s.min_speed, s.exclusive) == (
        2,
        "ResNet-18 (batch size 32)",
        12288,
        0.7,
        True,
    )
    assert s.model_card == CARD
    assert (s.priority, s.gpu_types, s.queue, s.owner) == (5, ("h100",), "team-a", "team-a")
    assert pod_ask(pod(notes={"horus.io/min-speed": "none"})).spec.min_speed == NO_FLOOR


def test_hami_and_kai_dialects() -> None:
    hami = pod_ask(pod(limits={"nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}))
    assert (hami.spec.gpu_memory_mib, hami.cores, hami.spec.hints.util_peak) == (3000, 30, 30.0)
    pct = pod_ask(pod(limits={"nvidia.com/gpumem-percentage": 25}))
    assert pct.memory_share == 0.25
    kai = pod_ask(pod(gpus=None, notes={"gpu-fraction": "0.5"}))
    assert (kai.spec.gpus, kai.memory_share) == (1, 0.5)
    kai_mem = pod_ask(pod(gpus=None, notes={"gpu-memory": "2000"}))
    assert (kai_mem.spec.gpus, kai_mem.spec.gpu_memory_mib) == (1, 2000)
    # a share resolves against the smallest GPU it may run on (A100 40 GiB here)
    w = build([node("n1")], [pod(limits={"nvidia.com/gpumem-percentage": 25})], "horus")
    assert w.snapshot.jobs[0].spec.gpu_memory_mib == 10240


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (pod(gpus="two"), "spec.containers[0].resources.limits[nvidia.com/gpu]"),
        (pod(gpus=0), "resources.limits[nvidia.com/gpu]"),
        (pod(notes={"horus.io/gpu-memory": "lots"}), "metadata.annotations[horus.io/gpu-memory]"),
        (pod(notes={"horus.io/min-speed": "2"}), "metadata.annotations[horus.io/min-speed]"),
        (pod(notes={"horus.io/exclusive": "maybe"}), "metadata.annotations[horus.io/exclusive]"),
        (pod(notes={"horus.io/model-card": "{"}), "metadata.annotations[horus.io/model-card]"),
        (pod(notes={"gpu-fraction": "1.5"}), "metadata.annotations[gpu-fraction]"),
        (pod(limits={"nvidia.com/gpumem-percentage": 120}), "resources.limits[nvidia.com/gpumem-percentage]"),
        (
            pod(labels={"horus.io/gang": "g", "horus.io/gang-size": "x"}),
            "metadata.labels[horus.io/gang-size]",
        ),
        (pod(requests={"cpu": "lots"}), "spec.containers[0].resources.requests[cpu]"),
    ],
)
def test_bad_values_name_the_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        pod_ask(value)
    assert err.value.field == field


def test_queues_and_classes() -> None:
    config = parse_config(
        {
            "queues": {
                "team-a": {"nominal": {"*": 4}},
                "research": {"nominal": {"*": 2}},
                "other": {"nominal": {"*": 1}},
            },
            "classes": {"high": {"level": 10, "preempt": True}},
            "default_queue": "other",
        }
    )
    assert pod_ask(pod(), config).spec.queue == "team-a"  # the namespace
    assert pod_ask(pod(namespace="elsewhere"), config).spec.queue == "other"
    kueue = pod(labels={"kueue.x-k8s.io/queue-name": "research"}, spec={"priorityClassName": "high"})
    got = pod_ask(kueue, config).spec
    assert (got.queue, got.priority_class) == ("research", "high")
    assert pod_ask(pod(spec={"priorityClassName": "system-node-critical"}), config).spec.priority_class == ""
    with pytest.raises(InvalidArgument, match="unknown queue 'nope'") as err:
        pod_ask(pod(labels={"kueue.x-k8s.io/queue-name": "nope"}), config)
    assert err.value.field == "metadata.labels[kueue.x-k8s.io/queue-name]"


def test_nodes() -> None:
    ready = node_facts(node("n1", 8))
    assert (len(ready.node.gpus), ready.node.state, ready.cpu) == (8, NodeState.READY, 16.0)
    g = ready.node.gpus[3]
    assert (g.uuid, g.index, g.gpu_type, g.memory_mib) == ("n1/3", 3, "a100", 40960)
    assert node_facts(node("n2", spec={"unschedulable": True})).node.state is NodeState.CORDONED
    assert node_facts(node("n3", ready="False")).node.state is NodeState.LOST
    tainted = node("n4", spec={"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]})
    assert node_facts(tainted).node.state is NodeState.LOST
    v100 = "32768,100,NVIDIA-Tesla V100-PCIE-32GB,0"
    reg = f"GPU-aaa,10,{v100},true:GPU-bbb,10,{v100},false:"
    hami = node_facts(node("h", 20, annotations={"hami.io/node-nvidia-register": reg}))
    assert hami.hami and [(x.uuid, x.gpu_type, x.memory_mib, x.healthy) for x in hami.node.gpus] == [
        ("GPU-aaa", "v100", 32768, True),
        ("GPU-bbb", "v100", 32768, False),
    ]


def _gang(name: str, size: int, count: int, gpus: int = 2) -> list[dict[str, Any]]:
    labels = {"horus.io/gang": name, "horus.io/gang-size": str(size)}
    return [pod(f"{name}-{i}", gpus, labels=labels) for i in range(count)]


def test_a_gang_is_one_job_placed_all_together_with_its_rendezvous() -> None:
    w = build([node("n1", 2), node("n2", 2), node("n3", 2)], _gang("g", 3, 3), "horus")
    (job,) = w.snapshot.jobs
    assert (job.id, job.spec.gpus, job.spec.gpus_per_node, job.spec.nodes) == ("team-a/gang:g", 6, 2, 3)
    (assign,) = [a for a in make_policy("fifo").decide(w.snapshot, 0.0) if isinstance(a, Assign)]
    placed = actions.placements(w, assign, 0.0)
    assert isinstance(placed, list) and len({p.node for p in placed}) == 3
    env = [dict(p.annotations) for p in placed]
    assert [e["horus.io/env.NODE_RANK"] for e in env] == ["0", "1", "2"]
    assert {e["horus.io/env.MASTER_ADDR"] for e in env} == {w.facts[placed[0].node].address}
    assert {e["horus.io/env.WORLD_SIZE"] for e in env} == {"6"}
    # too few pods: held, not given to the policy
    short = build([node("n1", 2), node("n2", 2)], _gang("h", 3, 2), "horus")
    assert not short.snapshot.jobs and "2 of its 3 pods" in short.held[0][0].reason


def test_placed_pods_rebuild_as_active_jobs_and_resume() -> None:
    notes = {"horus.io/node": "n1", "horus.io/gpus": "1", "horus.io/rank": "0"}
    bound = pod("a", notes=notes, spec={"nodeName": "n1"})
    bound["status"]["phase"] = "Running"
    planned = pod("b", notes={"horus.io/node": "n1", "horus.io/gpus": "0"})
    other = pod("c", spec={"nodeName": "n1", "schedulerName": "default-scheduler"})
    w = build([node("n1", 4)], [bound, planned, other, pod("d")], "horus")
    by = {j.id: j for j in w.snapshot.jobs}
    assert (by["team-a/a"].state.value, by["team-a/a"].gpus) == ("RUNNING", ("n1/1",))
    assert by["team-a/b"].gpus == ("n1/0",) and [a.name for a in w.resume] == ["b"]
    assert by["team-a/d"].state.value == "PENDING"
    hidden = [g.uuid for g in w.snapshot.nodes[0].gpus if not g.healthy]
    assert hidden == ["n1/3"]  # the other scheduler's pod holds one of the two free GPUs
    (assign,) = [a for a in make_policy("fifo").decide(w.snapshot, 0.0) if isinstance(a, Assign)]
    assert assign.gpus == ("n1/2",)


def test_cpu_and_memory_must_fit_and_hami_annotations() -> None:
    reg = "GPU-aaa,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
    big = pod("big", requests={"cpu": "32"})
    w = build([node("h", 10, cpu="8", annotations={"hami.io/node-nvidia-register": reg})], [big], "horus")
    assert actions.placements(w, Assign("team-a/big", "h", ("GPU-aaa",)), 0.0) == (
        "its CPU request (32) does not fit node h (8 cores free)"
    )
    small = pod("s", limits={"nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
    w = build([node("h", 10, annotations={"hami.io/node-nvidia-register": reg})], [small], "horus")
    placed = actions.placements(w, Assign("team-a/s", "h", ("GPU-aaa",)), 100.0)
    assert isinstance(placed, list)
    notes = placed[0].annotations
    assert notes["hami.io/vgpu-devices-allocated"] == "GPU-aaa,NVIDIA,3000,30:;"
    assert (notes["hami.io/vgpu-node"], notes["horus.io/gpus"]) == ("h", "0")


def test_refused_pods_and_wait_bodies() -> None:
    w = build([node("n1")], [pod("bad", notes={"horus.io/gpu-memory": "x"})], "horus")
    assert [(r.name, r.error.field) for r in w.refused] == [
        ("bad", "metadata.annotations[horus.io/gpu-memory]")
    ]
    cond = actions.condition("Resources", "no room", 0.0)["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Resources")
    ev = actions.event("ns", "p", "u", "FailedScheduling", "Resources: no room", "horus", 0.0)
    assert (ev["involvedObject"]["name"], ev["type"], ev["source"]["component"]) == ("p", "Warning", "horus")


def test_a_podgroup_min_member_makes_the_gang() -> None:
    labels = {"scheduling.x-k8s.io/pod-group": "pg"}
    pods = [pod(f"pg-{i}", 1, labels=labels) for i in range(2)]
    held = build([node("n1"), node("n2")], pods[:1], "horus", groups={"team-a/pg": 2})
    assert not held.snapshot.jobs and "1 of its 2 pods" in held.held[0][0].reason
    missing = build([node("n1")], pods, "horus")
    assert not missing.snapshot.jobs and "PodGroup pg: not found" in missing.held[0][0].reason
    w = build([node("n1"), node("n2")], pods, "horus", groups={"team-a/pg": 2})
    (job,) = w.snapshot.jobs
    assert (job.id, job.spec.gpus, job.spec.nodes) == ("team-a/gang:pg", 2, 2)


def test_a_plan_on_a_node_gone_is_decided_again() -> None:
    stale = pod("s", notes={"horus.io/node": "gone", "horus.io/gpus": "0"})
    w = build([node("n1")], [stale], "horus")
    assert [(j.id, j.state.value) for j in w.snapshot.jobs] == [("team-a/s", "PENDING")] and not w.resume


def test_mig_instances_are_gpus_of_their_profile() -> None:
    mixed = node("m1", 2)
    mixed["status"]["allocatable"] |= {"nvidia.com/mig-1g.5gb": "3", "nvidia.com/mig-3g.20gb": "1"}
    facts = node_facts(mixed)
    migs = [g for g in facts.node.gpus if g.uuid.startswith("m1/mig-")]
    assert [(g.gpu_type, g.memory_mib, g.index) for g in migs] == [
        ("a100-1g.5gb", 5120, 2),
        ("a100-1g.5gb", 5120, 3),
        ("a100-1g.5gb", 5120, 4),
        ("a100-3g.20gb", 20480, 5),
    ]
    assert abs(migs[-1].compute_fraction - 3 / 7) < 1e-9
    ask = pod("small", gpus=None, limits={"nvidia.com/mig-1g.5gb": 1})
    other = pod(
        "other", gpus=None, limits={"nvidia.com/mig-1g.5gb": 2}, spec={"nodeName": "m1", "schedulerName": "x"}
    )
    w = build([mixed], [ask, other], "horus")
    (job,) = w.snapshot.jobs
    assert (job.spec.gpus, job.spec.gpu_types) == (1, ("a100-1g.5gb",))
    free = [g.uuid for g in w.snapshot.nodes[0].gpus if g.healthy and g.gpu_type == "a100-1g.5gb"]
    assert free == ["m1/mig-1g.5gb/0"]  # the other scheduler's pod holds two of the three
    (assign,) = [a for a in make_policy("fifo").decide(w.snapshot, 0.0) if isinstance(a, Assign)]
    assert assign.gpus == ("m1/mig-1g.5gb/0",)
    with pytest.raises(InvalidArgument, match="not both"):
        pod_ask(pod("both", gpus=1, limits={"nvidia.com/mig-1g.5gb": 1}))
    lost = build([node("n1")], [ask], "horus").snapshot.jobs[0]
    assert lost.spec.gpu_types == ("mig-1g.5gb",)  # no such instance: it waits GpuTypeUnavailable
