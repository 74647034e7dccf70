"""A pod as the node agent reads it (worker/k8s/pods.py): the GPU memory cap from Horus', HAMi's
and KAI's annotations and resources in their order, bad values named, and container endings."""

from __future__ import annotations

from typing import Any

import pytest

from worker.k8s.pods import Cap, Termination, node_pod, pod_cap

G0 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
G1 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"


def _pod(
    notes: dict[str, str] | None = None, limits: list[dict[str, str]] | None = None, **status: Any
) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "resources": {"limits": lim}} for i, lim in enumerate(limits or [{}])]
    return {
        "metadata": {"uid": "u1", "name": "p", "namespace": "ns", "annotations": notes or {}},
        "spec": {"nodeName": "n1", "containers": containers},
        "status": status,
    }


def _cap(
    notes: dict[str, str] | None = None, limits: list[dict[str, str]] | None = None
) -> tuple[Cap, tuple[str, ...]]:
    pod = node_pod(_pod(notes, limits))
    assert pod is not None
    return pod.cap, pod.problems


@pytest.mark.parametrize(
    ("notes", "limits", "mib_on_16g", "source"),
    [
        ({"horus.io/gpu-memory": "4GiB"}, None, 4096, "horus.io/gpu-memory"),
        ({"horus.io/gpu-memory": "3000"}, None, 3000, "horus.io/gpu-memory"),
        # HAMi's allocation: two containers on G0 add up, G1 less: the larger GPU's sum
        (
            {
                "hami.io/vgpu-devices-allocated": f"{G0},NVIDIA,3000,30:;{G0},NVIDIA,1000,0:"
                f"{G1},NVIDIA,2500,0:;"
            },
            None,
            4000,
            "hami.io/vgpu-devices-allocated",
        ),
        # the allocation wins over the declared size (it is what the pod was bound with)
        (
            {"hami.io/vgpu-devices-allocated": f"{G0},NVIDIA,5000,0:;", "horus.io/gpu-memory": "4GiB"},
            None,
            5000,
            "hami.io/vgpu-devices-allocated",
        ),
        (
            {},
            [{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2048"}, {"nvidia.com/gpumem": "1024"}],
            3072,
            "nvidia.com/gpumem",
        ),
        ({}, [{"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}], 4096, "nvidia.com/gpumem"),
        ({"gpu-memory": "6000"}, None, 6000, "gpu-memory"),
        ({"gpu-fraction": "0.5"}, None, 8192, "gpu-memory"),
        ({"horus.io/gpu-memory": "4GiB", "gpu-fraction": "0.5"}, None, 4096, "horus.io/gpu-memory"),
        ({"horus.io/exclusive": "true", "horus.io/gpu-memory": "4GiB"}, None, 0, "horus.io/exclusive"),
        ({}, [{"nvidia.com/gpu": "1"}], 0, ""),
    ],
    ids=[
        "horus",
        "horus-mib",
        "hami-alloc",
        "alloc-first",
        "hami-mem",
        "hami-pct",
        "kai-mem",
        "kai-frac",
        "horus-over-kai",
        "exclusive",
        "none",
    ],
)
def test_the_cap_comes_from_the_first_source_present(
    notes: dict[str, str], limits: list[dict[str, str]] | None, mib_on_16g: int, source: str
) -> None:
    cap, problems = _cap(notes, limits)
    assert (cap.on(16384), cap.source, problems) == (mib_on_16g, source, ())


@pytest.mark.parametrize(
    ("notes", "limits", "named"),
    [
        ({"horus.io/gpu-memory": "lots"}, None, "horus.io/gpu-memory"),
        ({"horus.io/gpu-memory": "-4GiB"}, None, "horus.io/gpu-memory"),
        ({"hami.io/vgpu-devices-allocated": f"{G0},NVIDIA:;"}, None, "hami.io/vgpu-devices-allocated"),
        ({"hami.io/vgpu-devices-allocated": f"{G0},NVIDIA,many,0:;"}, None, "hami.io/vgpu-devices-allocated"),
        ({}, [{"nvidia.com/gpumem": "3Gi"}], "nvidia.com/gpumem"),
        ({}, [{"nvidia.com/gpumem-percentage": "250"}], "nvidia.com/gpumem"),
        ({"gpu-fraction": "nan"}, None, "gpu-memory"),
        ({"gpu-fraction": "1.5"}, None, "gpu-memory"),
        ({"gpu-memory": "99999999999"}, None, "gpu-memory"),
    ],
)
def test_a_bad_value_is_named_and_the_next_source_tried(
    notes: dict[str, str], limits: list[dict[str, str]] | None, named: str
) -> None:
    cap, problems = _cap(notes, limits)
    assert cap == Cap() and len(problems) == 1 and problems[0].startswith(f"{named}: "), problems
    if named != "gpu-memory":  # a source after the bad one (KAI's) is then used
        cap, problems = _cap({**notes, "gpu-memory": "5000"}, limits)
        assert cap.on(0) == 5000 and cap.source == "gpu-memory" and len(problems) == 1


def test_pod_cap_on_a_fraction_rounds_up() -> None:
    assert pod_cap({"gpu-fraction": "0.3"}, [], []).on(16160) == 4848
    assert pod_cap({"gpu-fraction": "0.3"}, [], []).on(1001) == 301


def test_what_is_not_a_pod_reads_as_none() -> None:
    assert node_pod({}) is None
    assert node_pod({"metadata": {"uid": "u", "name": "p"}}) is None
    assert node_pod({"metadata": {"uid": 3, "name": "p", "namespace": "ns"}}) is None
    odd = node_pod(
        {"metadata": {"uid": "u", "name": "p", "namespace": "ns", "annotations": ["x"]}, "spec": "no"}
    )
    assert odd is not None and odd.cap == Cap() and odd.ended == ()


def test_endings_of_running_restarted_and_finished_containers() -> None:
    statuses = [
        {"name": "a", "restartCount": 0, "state": {"running": {}}},
        {
            "name": "b",
            "restartCount": 2,
            "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 1, "message": "CUDA out of memory"}},
        },
        {"name": "c", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "d", "restartCount": "x", "state": {"terminated": {"exitCode": "1"}}},
    ]
    pod = node_pod(_pod(phase="Running", containerStatuses=statuses))
    assert pod is not None and not pod.finished
    assert pod.ended == (Termination("b", 1, 1, "CUDA out of memory"), Termination("c", 0, 0, ""))


def test_annotations_the_agent_also_reads() -> None:
    obj = _pod(
        {
            "horus.io/gpus": "0, 1,",
            "horus.io/job-type": "ResNet-50 (batch size 64)",
            "kubernetes.io/config.hash": "abc",
        }
    )
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj["status"] = {"phase": "Failed"}
    pod = node_pod(obj)
    assert pod is not None
    assert (pod.gpus, pod.job_type, pod.config_hash, pod.deleting, pod.finished) == (
        ("0", "1"),
        "ResNet-50 (batch size 64)",
        "abc",
        True,
        True,
    )
