"""The simulator reports progress to ``horus`` as live jobs would: every round the running jobs'
steps, with ``loss_curves`` a loss on each job's synthetic curve, and with ``hide_total_steps``
specs that carry no length, so the remaining-work order learns lengths only from the loss."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import default_model
from horus_core.policies import horus
from horus_core.policies.numbering import Numbered
from horus_core.policies.optimus.history import Report
from horus_core.sim import SimConfig, Simulator, TraceJob, build_cluster

R50 = "ResNet-50 (batch size 64)"
JOBS = [TraceJob(R50, 1, 2_000_000, 60.0 * i) for i in range(12)]


def run(**config: Any) -> tuple[Simulator, horus.HorusPolicy, list[tuple[str, float | None, int]]]:
    """A 4-GPU run of 12 one-GPU jobs; returns what the policy heard (id, loss, total_steps)."""
    policy = horus.make(default_model())
    heard: list[tuple[str, float | None, int]] = []
    sim = Simulator(JOBS, build_cluster("v100:4"), policy, default_model(), SimConfig(**config))
    work = policy.las.work  # type: ignore[union-attr]
    assert work is not None
    observe, observe_many, observe_columns = work.observe_progress, work.observe_many, work.observe_columns

    def spy(job_id: str, step: float, loss: float | None, now: float) -> None:
        heard.append((job_id, loss, sim.by_id[job_id].spec.total_steps))
        observe(job_id, step, loss, now)

    def spy_many(reports: Iterable[Report]) -> None:  # (the simulator's reports before a round)
        reports = list(reports)
        heard.extend((job_id, loss, sim.by_id[job_id].spec.total_steps) for job_id, _, loss, _ in reports)
        observe_many(reports)

    def spy_columns(
        ids: Sequence[str],
        steps: NDArray[np.float64],
        losses: Sequence[float | None] | None,
        now: float,
        numbered: Numbered | None = None,
    ) -> None:  # (the same, as columns)
        heard.extend((job_id, None if losses is None else losses[i], sim.by_id[job_id].spec.total_steps)
                     for i, job_id in enumerate(ids))  # fmt: skip
        observe_columns(ids, steps, losses, now, numbered)

    work.observe_progress, work.observe_many = spy, spy_many  # type: ignore[method-assign]
    work.observe_columns = spy_columns  # type: ignore[method-assign]
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
    policy = horus.make(default_model())
    sim = Simulator(jobs, build_cluster("v100:4"), policy, default_model(), SimConfig())
    work = policy.las.work  # type: ignore[union-attr]
    assert work is not None
    rounds: list[list[str]] = []
    observe_columns = work.observe_columns

    def spy(
        ids: Sequence[str],
        steps: NDArray[np.float64],
        losses: Sequence[float | None] | None,
        now: float,
        numbered: Numbered | None = None,
    ) -> None:
        rounds.append(list(ids))
        assert numbered is not None and numbered[1].tolist() == [sim.by_id[i].idx for i in ids]
        observe_columns(ids, steps, losses, now, numbered)

    work.observe_columns = spy  # type: ignore[method-assign]
    sim.run()
    index = {j.id: j.idx for j in sim.jobs}
    assert all(r == sorted(r, key=index.__getitem__) for r in rounds)
    behind = sum(
        1 for before, now in pairwise(rounds) for i in set(now) - set(before)
        if before and index[i] < max(map(index.__getitem__, before))
    )  # fmt: skip
    assert behind > 0 and sim.finished == len(jobs)
