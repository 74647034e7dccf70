"""Teams in a simulation (issue 13): a seeded rule that gives each trace job a team (its queue)
and a user, and what each team got out of a run: its share of the GPU-time and its JCT.

``--teams a:0.8,b:0.2`` sends each job to team ``a`` with probability 0.8, else ``b``; within a
team, jobs go round-robin to ``users`` users named ``a-u0``, ``a-u1``, ...
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from horus_core.errors import InvalidArgument
from horus_core.queues.config import QueueConfig
from horus_core.sim.config import SimResult
from horus_core.sim.traces import TraceJob

HOUR = 3600.0


def parse_teams(text: str) -> dict[str, float]:
    """``"a:0.8,b:0.2"`` -> {"a": 0.8, "b": 0.2} (weights, normalised when drawing)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, weight = part.partition(":")
        try:
            value = float(weight) if sep else 1.0
        except ValueError:
            value = -1.0
        if not name or not value > 0 or value == float("inf") or name in out:
            raise InvalidArgument("teams", f"expected NAME:WEIGHT,... with positive weights, got {part!r}")
        out[name] = value
    if not out:
        raise InvalidArgument("teams", "give at least one team, e.g. a:0.8,b:0.2")
    return out


def assign_teams(
    jobs: Sequence[TraceJob], teams: Mapping[str, float], seed: int = 0, users: int = 2
) -> list[TraceJob]:
    """Each job with ``owner`` and ``queue`` set by a seeded draw (the same seed: the same split)."""
    rng = random.Random(seed)
    names, weights = list(teams), list(teams.values())
    counts = dict.fromkeys(names, 0)
    out = []
    for job in jobs:
        team = rng.choices(names, weights)[0]
        user = f"{team}-u{counts[team] % max(1, users)}"
        counts[team] += 1
        out.append(dataclasses.replace(job, owner=user, queue=team))
    return out


@dataclass(frozen=True, slots=True)
class TeamFigures:
    team: str
    jobs: int
    unfinished: int
    gpu_h: float  # GPU-time its jobs held
    share: float  # of all teams' GPU-time
    avg_jct_h: float  # finished jobs only (nan: none)


def team_figures(result: SimResult) -> list[TeamFigures]:
    """Per team (queue) of a run: jobs, GPU-time held and its share, average JCT."""
    by_team: dict[str, list[tuple[float, float | None]]] = {}
    for r in result.records:
        by_team.setdefault(r.queue, []).append((r.gpus * r.run_s, r.jct))
    total = sum(g for rows in by_team.values() for g, _ in rows) or 1.0
    out = []
    for team, rows in sorted(by_team.items()):
        jcts = [j for _, j in rows if j is not None]
        gpu_s = sum(g for g, _ in rows)
        avg = sum(jcts) / len(jcts) / HOUR if jcts else float("nan")
        out.append(TeamFigures(team, len(rows), len(rows) - len(jcts), gpu_s / HOUR, gpu_s / total, avg))
    return out


def team_metrics(result: SimResult) -> dict[str, float | int]:
    """Flat keys for the metrics JSON: ``team_<t>_share``, ``_gpu_h``, ``_avg_jct_h``, ``_unfinished``."""
    out: dict[str, float | int] = {}
    for f in team_figures(result):
        out |= {
            f"team_{f.team}_share": round(f.share, 4),
            f"team_{f.team}_gpu_h": round(f.gpu_h, 2),
            f"team_{f.team}_avg_jct_h": round(f.avg_jct_h, 3),
            f"team_{f.team}_unfinished": f.unfinished,
        }
    return out


def format_teams(results: Mapping[str, SimResult], queues: QueueConfig | None) -> str:
    """A table per (policy, team): jobs, GPU-time, its share against the quota's share, JCT."""
    lines = ["policy  team  jobs  GPU h  share  quota share  avg JCT h  unfinished"]
    total_quota = sum(q.nominal_total for q in queues.queues.values()) if queues else 0
    for name, result in results.items():
        for f in team_figures(result):
            quota = queues.queues.get(f.team) if queues else None
            q_share = f"{quota.nominal_total / total_quota:.3f}" if quota and total_quota else "-"
            lines.append(
                f"{name}  {f.team}  {f.jobs}  {f.gpu_h:.1f}  {f.share:.3f}  {q_share}  "
                f"{f.avg_jct_h:.2f}  {f.unfinished}"
            )
    return "\n".join(lines)
