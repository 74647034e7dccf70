"""MIG instances as GPU types (docs/sharing.md): NVML's names map to ``h100-3g.40gb``-style types,
a job may ask for a profile, and every policy places it only on such an instance."""

from __future__ import annotations

import pytest

from horus_core.model import ClusterSnapshot, Gpu, Job, JobSpec, JobState, Node, gpu_type_of
from horus_core.policies import make_policy
from horus_core.policies.checks import check_actions
from horus_core.validation import validate_spec

H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("model", "kind"),
    [
        (f"{H100} MIG 3g.40gb", "h100-3g.40gb"),
        (f"{H100} MIG 1g.10gb", "h100-1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me", "a100-1g.5gb-me"),
        ("NVIDIA A30 MIG 2g.12gb", "a30-2g.12gb"),
        (H100, "h100"),
    ],
)
def test_mig_instances_are_typed_by_family_and_profile(model: str, kind: str) -> None:
    assert gpu_type_of(model) == kind
    validate_spec(JobSpec(("x",), gpu_types=(kind,)))  # a job may ask for it


def mig_node() -> Node:
    slices = [("3g.40gb", 40960, 3 / 7), ("1g.10gb", 10240, 1 / 7), ("1g.10gb", 10240, 1 / 7)]
    gpus = tuple(
        Gpu(
            f"MIG-{i}",
            "n0",
            i,
            f"{H100} MIG {p}",
            mib,
            gpu_type_of(f"{H100} MIG {p}"),
            True,
            "",
            share,
            "GPU-0",
        )
        for i, (p, mib, share) in enumerate(slices)
    )
    return Node("n0", gpus)


@pytest.mark.parametrize("policy", ["fifo", "horus", "lucid", "gavel-las-packed"])
def test_a_job_asking_for_a_profile_runs_only_on_such_an_instance(policy: str) -> None:
    jobs = tuple(
        Job(f"j{i}", JobSpec(("x",), job_type="ResNet-18 (batch size 16)", gpu_types=(t,)), JobState.PENDING)
        for i, t in enumerate(["h100-1g.10gb", "h100-3g.40gb", "h100-1g.10gb"])
    )
    snapshot = ClusterSnapshot((mig_node(),), jobs)
    plan = check_actions(snapshot, make_policy(policy).decide(snapshot, 1.0))
    kinds = {g.uuid: g.gpu_type for g in mig_node().gpus}
    placed = {a.job_id: kinds[a.gpus[0]] for a in plan.assigns}
    assert placed and all(
        kinds_ok for kinds_ok in (placed[j.id] == j.spec.gpu_types[0] for j in jobs if j.id in placed)
    )
