"""The simulator reports progress to ``horus`` as live jobs would: every round the running jobs'
steps, with ``loss_curves`` a loss on each job's synthetic curve, and with ``hide_total_steps``
specs that carry no length, so the remaining-work order learns lengths only from the loss."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from horus_core.interference import default_model
from horus_core.policies import horus
from horus_core.policies.base import Reports
from horus_core.policies.pack import PackingPolicy, build
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster

R50 = "ResNet-50 (batch size 64)"
JOBS = [TraceJob(R50, 1, 2_000_000, 60.0 * i) for i in range(12)]


def run(**config: Any) -> tuple[Simulator, PackingPolicy, list[tuple[str, float | None, int]]]:
    """A 4-GPU run of 12 one-GPU jobs; returns what the policy heard (id, loss, total_steps)."""
    policy = build(horus.HORUS, default_model())
    heard: list[tuple[str, float | None, int]] = []
    sim = Simulator(JOBS, build_cluster("v100:4"), policy, default_model(), SimConfig(**config))
    work = policy.progress
    assert work is not None
    hear = work.hear

    def spy(reports: Reports) -> None:  # (the simulator's reports before a round, or of a stop)
        losses = reports.losses
        heard.extend((job_id, None if losses is None else losses[i], sim.by_id[job_id].spec.total_steps)
                     for i, job_id in enumerate(reports.ids))  # fmt: skip
        hear(reports)

    work.hear = spy  # type: ignore[method-assign]
    sim.run()
    return sim, policy, heard


def test_by_default_jobs_report_steps_and_specs_carry_their_length() -> None:
    sim, _, heard = run()
    assert heard and all(loss is None and total == 2_000_000 for _, loss, total in heard)
    assert sim.finished == len(JOBS)


def test_loss_curves_and_hidden_lengths_report_as_a_job_without_total_steps() -> None:
    sim, _, heard = run(loss_curves=True, hide_total_steps=True)
    with_loss = [h for h in heard if h[1] is not None]
    assert len(with_loss) > len(JOBS) and all(total == 0 for _, _, total in heard)
    assert {h[0] for h in with_loss} == {j.id for j in sim.jobs}  # every job reported a loss
    assert all(j.steps == 2_000_000 for j in sim.jobs)  # the simulator still knows the truth


def test_simconfig_flags_default_off() -> None:
    cfg = SimConfig()
    assert (cfg.loss_curves, cfg.hide_total_steps) == (False, False)


def test_each_rounds_reports_come_in_the_jobs_order_even_when_a_job_starts_behind_later_ones() -> None:
    """The reports of a round come in the snapshot's order (the jobs' indices), also after a job
    (stopped, or left waiting) starts again behind jobs that arrived after it."""
    jobs = [TraceJob(R50, 4 if i % 3 == 0 else 1, 400_000 * (1 + i % 4), 300.0 * i) for i in range(16)]
    policy = build(horus.HORUS, default_model())
    sim = Simulator(jobs, build_cluster("v100:4"), policy, default_model(), SimConfig())
    work = policy.progress
    assert work is not None
    rounds: list[list[str]] = []
    hear = work.hear

    def spy(reports: Reports) -> None:
        if reports.numbers is not None:  # (a round's reports; a stop's come alone, unnumbered)
            rounds.append(list(reports.ids))
            assert reports.numbers[1].tolist() == [sim.by_id[i].idx for i in reports.ids]
        hear(reports)

    work.hear = spy  # type: ignore[method-assign]
    sim.run()
    index = {j.id: j.idx for j in sim.jobs}
    assert all(r == sorted(r, key=index.__getitem__) for r in rounds)
    behind = sum(
        1 for before, now in pairwise(rounds) for i in set(now) - set(before)
        if before and index[i] < max(map(index.__getitem__, before))
    )  # fmt: skip
    assert behind > 0 and sim.finished == len(jobs)
