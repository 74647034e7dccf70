"""The packing counts each job at its GPU memory cap: whatever the jobs declare (or not), the caps
on a GPU never exceed its memory less the reserve (a property over random clusters and queues,
through the policies' own decide() and the master's action checks); a declared cap may also be
smaller than the workload's footprint, and a job then fits where its footprint would not."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_core.caps import attempt_cap
from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.profiles import RESERVE_MIB
from horus_core.model import Assign, ClusterSnapshot, Job, JobSpec, JobState, ProfileHints
from horus_core.policies import make_policy
from horus_core.policies.checks import check_actions
from horus_core.sim.cluster import build_cluster
from horus_core.testing import placed

TYPES = ["", "ResNet-18 (batch size 32)", "ResNet-50 (batch size 64)", "LM (batch size 5)", "A3C", "CycleGAN"]
MODEL = default_model()


def footprint(model: InterferenceModel, spec: JobSpec) -> int:
    return model.profile_of(model.demand(spec)).mem_mib


def caps_per_gpu(snapshot: ClusterSnapshot, model: InterferenceModel) -> dict[str, int]:
    """Each GPU's caps summed over its jobs, as the master sets them at placement."""
    out: dict[str, int] = {}
    for job in snapshot.active():
        if not job.spec.exclusive:
            for uuid in job.gpus:
                out[uuid] = out.get(uuid, 0) + job.gpu_memory_cap_mib
    return out


specs = st.builds(
    lambda t, cap, gpus, excl: JobSpec(("x",), job_type=t, gpu_memory_mib=cap, gpus=gpus, exclusive=excl),
    st.sampled_from(TYPES),
    st.one_of(st.just(0), st.integers(256, 16_000)),
    st.sampled_from([1, 1, 1, 2]),
    st.sampled_from([False, False, False, True]),
)


@settings(max_examples=40, deadline=None)
@given(
    cluster=st.sampled_from(["v100:4", "k80:2,v100:2", "k80:4,p100:2", "v100:8"]),
    queue=st.lists(specs, min_size=1, max_size=14),
    policy=st.sampled_from(["horus", "binpack", "lucid", "horus-paper"]),
)
def test_caps_on_a_gpu_never_exceed_its_memory_less_the_reserve(
    cluster: str, queue: list[JobSpec], policy: str
) -> None:
    nodes = build_cluster(cluster)
    memory = {g.uuid: g.memory_mib for n in nodes for g in n.gpus}
    jobs = {
        f"j{i}": Job(f"j{i}", spec, JobState.PENDING, submitted_at=float(i)) for i, spec in enumerate(queue)
    }
    chosen = make_policy(policy, MODEL)
    for now in (10.0, 20.0, 30.0):  # a few passes: later jobs are placed beside earlier ones
        snapshot = ClusterSnapshot(nodes, tuple(jobs.values()))
        plan = check_actions(snapshot, chosen.decide(snapshot, now))
        for a in plan.assigns:
            jobs[a.job_id] = _placed(jobs[a.job_id], a, now)
    snapshot = ClusterSnapshot(nodes, tuple(jobs.values()))
    for uuid, total in caps_per_gpu(snapshot, MODEL).items():
        assert total <= memory[uuid] - RESERVE_MIB, (uuid, total, memory[uuid])


def _placed(job: Job, a: Assign, now: float) -> Job:
    cap = 0 if job.spec.exclusive else attempt_cap(job.spec, footprint(MODEL, job.spec))
    return dataclasses.replace(placed(job, a, now), gpu_memory_cap_mib=cap)


def test_a_declared_cap_below_the_footprint_lets_two_jobs_share() -> None:
    nodes = build_cluster("v100:1")
    light = JobSpec(("x",), hints=ProfileHints(util_avg=20.0, util_peak=30.0))  # memory unknown: 10 GiB
    capped = dataclasses.replace(light, gpu_memory_mib=4096)

    def placed_count(spec: JobSpec) -> int:
        jobs = tuple(Job(f"j{i}", spec, JobState.PENDING, submitted_at=float(i)) for i in range(2))
        snapshot = ClusterSnapshot(nodes, jobs)
        return len(check_actions(snapshot, make_policy("horus", MODEL).decide(snapshot, 1.0)).assigns)

    assert footprint(MODEL, light) == 10240 and footprint(MODEL, capped) == 4096
    assert placed_count(light) == 1 and placed_count(capped) == 2
    key, sig = MODEL.demand(capped), MODEL.signature(capped)
    assert key != sig and MODEL.pair_speeds(key, key, "v100") == MODEL.pair_speeds(sig, sig, "v100")
    assert MODEL.co_speeds([sig, sig], "v100") == (0.0, 0.0)  # (10 GiB twice: no room on 16 GB)
