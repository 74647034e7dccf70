"""A reclaim that takes several passes keeps what each pass freed for its job (queues/policy.py,
``_reserve``): the GPUs an earlier pass freed are not handed back to the jobs preempted from them
while the job they were freed for still waits. Before, each pass's reservation replaced the last,
so two teams on 16 V100 (binpack, no minimum run) preempted in nearly every round: 108,046 times in
117,729 rounds. The sim's first 300 jobs of the packaged trace, as docs/evaluation.md section 4."""

from __future__ import annotations

from pathlib import Path

from horus_core.interference import default_model
from horus_core.model import Action, ClusterSnapshot, Preempt
from horus_core.policies import make_policy
from horus_core.queues import QueuedPolicy
from horus_core.queues.config import load_config
from horus_core.sim.cluster import build_cluster
from horus_core.sim.config import SimConfig
from horus_core.sim.engine import Simulator
from horus_core.sim.teams import assign_teams, parse_teams
from horus_core.sim.traces import load_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "horus_core" / "data" / "traces" / "msr_seed0_2869ce_cap.trace"


class TooMany(Exception):
    pass


def test_two_teams_under_binpack_do_not_preempt_in_a_loop() -> None:
    model, config = default_model(), SimConfig(min_speed=0.0)
    jobs = assign_teams(load_trace(TRACE)[:300], parse_teams("a:0.8,b:0.2"), 0, 2)
    queues = load_config(str(ROOT / "studies" / "queues" / "two_teams.toml"))
    policy = QueuedPolicy(make_policy("binpack", model, round_s=config.round_s), queues, min_run_s=0.0)
    preempts: list[str] = []
    decide = policy.decide

    def counted(snapshot: ClusterSnapshot, now: float) -> list[Action]:
        actions = decide(snapshot, now)
        preempts.extend(a.reason for a in actions if isinstance(a, Preempt))
        if len(preempts) > 1_000:  # (a loop: stop it here rather than run 100,000 rounds)
            raise TooMany(preempts[-3:])
        return actions

    policy.decide = counted  # type: ignore[method-assign]
    result = Simulator(jobs, build_cluster("v100:16", 8), policy, model, config, None).run()
    assert len(preempts) < 100, preempts[-3:]
    assert result.unfinished == 0 and result.counters["preemptions"] == len(preempts)
