"""``horus-sim``: replay a trace under several policies and compare them.

    horus-sim --trace horus_core/data/traces/msr_seed0_2869ce_cap.trace --cluster v100:16 \\
              --policies fifo,binpack,horus --out runs/sim [--json]
              [--throughputs FILE] [--cold-start [--cards [FILE]]]

Exit status: 0 done, 2 bad input (unknown policy, bad cluster spec, malformed trace),
1 the simulation failed (e.g. a policy returned an impossible action, or finished none of the
trace's jobs: the table marks it FAILED, and a policy that left some jobs unfinished with ``*``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from horus_core.errors import InvalidArgument
from horus_core.floor import DEFAULT_MIN_SPEED
from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.table import load_table, packaged_table
from horus_core.model import Node
from horus_core.modelcard import ModelCard, packaged_cards, parse_cards
from horus_core.policies import (
    OBJECTIVES,
    Policy,
    add_policy_module_option,
    load_policy_module,
    make_policy,
)
from horus_core.queues import QueueConfig, QueuedPolicy, load_config
from horus_core.sim.api import check_policies, load_workload
from horus_core.sim.cluster import DEFAULT_GPUS_PER_NODE, build_cluster
from horus_core.sim.cold import ColdLearner, cold_model
from horus_core.sim.config import RESTART_COST_S, ROUND_S, SimConfig, SimResult
from horus_core.sim.engine import Simulator
from horus_core.sim.metrics import Metrics, summarize
from horus_core.sim.progress import ProgressBar
from horus_core.sim.rates import SimulationError
from horus_core.sim.report import failed, format_table, to_json
from horus_core.sim.scaling import NODE_FACTOR, RACK_FACTOR
from horus_core.sim.synthetic import is_synthetic
from horus_core.sim.teams import assign_teams, format_teams, parse_teams, team_metrics
from horus_core.sim.traces import TraceJob, as_batch, load_trace

PACKAGED_CARDS = "(packaged)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="horus-sim", description="Trace-driven comparison of scheduling policies."
    )
    p.add_argument(
        "--trace",
        required=True,
        help="trace file (Gavel .trace or our .csv) or synthetic:jobs=N,rate=R,seed=S",
    )
    p.add_argument("--cluster", required=True, help="GPUs per type, e.g. v100:64 or k80:32,p100:32,v100:32")
    p.add_argument("--gpus-per-node", type=int, default=DEFAULT_GPUS_PER_NODE)
    p.add_argument("--policies", default="fifo", help="comma-separated policy names")
    add_policy_module_option(p)
    p.add_argument("--out", type=Path, help="directory for metrics.json and PNG plots")
    p.add_argument("--json", action="store_true", help="print {policy: {metric: value}} instead of a table")
    p.add_argument("--seed", type=int, help="seed of a synthetic trace that names none")
    p.add_argument(
        "--round-s",
        type=float,
        default=ROUND_S,
        help="periodic round length, also the Gavel policies' round (default 360; 0: no periodic rounds)",
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="jct",
        help="what horus serves: each job's completion time (jct, default) or the whole queue's "
        "(makespan: longest work first, docs/policies.md); other policies ignore it",
    )
    p.add_argument("--min-gap-s", type=float, default=0.0, help="coalesce event rounds closer than this")
    p.add_argument("--no-event-rounds", action="store_true", help="schedule on periodic rounds only")
    p.add_argument("--skip-idle-rounds", action="store_true", help="no event round while nothing is pending")
    p.add_argument("--restart-cost-s", type=float, default=RESTART_COST_S, help="work lost per preemption")
    p.add_argument("--elastic", type=float, default=0.0, help="fraction of jobs made elastic (0..1)")
    p.add_argument("--elastic-seed", type=int, default=0, help="seed of the elastic draw and loss curves")
    p.add_argument(
        "--elastic-unknown-steps", action="store_true", help="elastic jobs hide total_steps from policies"
    )
    p.add_argument(
        "--min-speed",
        type=float,
        default=DEFAULT_MIN_SPEED,
        metavar="FRACTION",
        help="speed floor of every job in [0, 1], as the master's --min-speed default "
        f"(default {DEFAULT_MIN_SPEED:g}; 0: none beyond the policy's own rule)",
    )
    p.add_argument("--jobs", type=int, default=0, metavar="N", help="only the trace's first N jobs (0: all)")
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="a batch: the trace's first N jobs, all arriving at time 0 (not with --jobs)",
    )
    p.add_argument(
        "--cross-node-factor", type=float, default=NODE_FACTOR, help="rate kept per extra node a gang spans"
    )
    p.add_argument(
        "--cross-rack-factor", type=float, default=RACK_FACTOR, help="rate kept per extra rack a gang spans"
    )
    p.add_argument("--queues", type=Path, metavar="FILE", help="queues and quotas (TOML, docs/queues.md)")
    p.add_argument(
        "--min-run-s", type=float, default=0.0, help="with --queues: least run before a preemption"
    )
    p.add_argument("--teams", metavar="A:W,B:W", help="split the jobs into teams (queues) by seeded draw")
    p.add_argument("--teams-seed", type=int, default=0, help="seed of the --teams draw")
    p.add_argument("--team-users", type=int, default=2, help="users per team (round-robin)")
    p.add_argument("--loss-curves", action="store_true", help="every job reports a loss on a synthetic curve")
    p.add_argument(
        "--hide-total-steps", action="store_true", help="specs carry no total_steps (lengths from loss only)"
    )
    p.add_argument(
        "--throughputs",
        type=Path,
        metavar="FILE",
        help="a measured pair table in Gavel's format instead of the packaged one (the ground truth)",
    )
    p.add_argument(
        "--cold-start",
        action="store_true",
        help="policies see no table row or profile of the trace's job types, only model cards (--cards) "
        "and what running jobs show; the ground truth stays the table (docs/prediction.md)",
    )
    p.add_argument(
        "--cards",
        nargs="?",
        const=PACKAGED_CARDS,
        metavar="FILE",
        help="with --cold-start: model cards by job type (JSON); without FILE, the cards of the "
        "reference models shipped with Horus (the packaged table's job types)",
    )
    p.add_argument("--strict", action="store_true", help="fail on an action the master would drop")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when it is not a TTY")
    p.add_argument("--no-plots", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except InvalidArgument as exc:
        print(f"horus-sim: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:
        print(f"horus-sim: simulation failed: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    for path in args.policy_module:
        load_policy_module(path)
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    if not names:
        raise InvalidArgument("policies", "give at least one policy name")
    check_policies(names)
    nodes = build_cluster(args.cluster, args.gpus_per_node)
    config = _config(args)
    # A trace file is checked before the model loads; a synthetic trace needs the model.
    jobs = None if is_synthetic(args.trace) else load_trace(args.trace)
    table = load_table(args.throughputs) if args.throughputs is not None else packaged_table()
    model = InterferenceModel(table) if args.throughputs is not None else default_model()
    cards = _cards(args)
    jobs = jobs if jobs is not None else load_workload(args.trace, model, args.seed)
    if args.jobs < 0:
        raise InvalidArgument("jobs", f"must not be negative, got {args.jobs}")
    jobs = jobs[: args.jobs] if args.jobs else jobs
    if args.batch is not None:
        if args.jobs:
            raise InvalidArgument("batch", "give --batch N or --jobs N, not both (--batch takes the first N)")
        jobs = as_batch(jobs, args.batch)
    queues = _queues(args)
    if args.teams:
        jobs = assign_teams(jobs, parse_teams(args.teams), args.teams_seed, args.team_users)
    results: dict[str, SimResult] = {}
    for name in names:
        seen, learner = model, None
        if args.cold_start:  # a fresh model per policy: what it learns is its own
            seen = cold_model(table, {j.job_type for j in jobs}, cards)
            learner = ColdLearner(model, seen)
        results[name] = _one(
            _policy(name, seen, queues, args.min_run_s, config.round_s, args.objective),
            jobs,
            nodes,
            model,
            config,
            args.progress,
            learner,
        )
    metrics = {name: summarize(r) for name, r in results.items()}
    if args.teams:
        for name, r in results.items():
            metrics[name].update(team_metrics(r))
    print(to_json(metrics) if args.json else format_table(metrics))
    if args.teams and not args.json:
        print(format_teams(results, queues))
    if args.out is not None:
        _write_outputs(args, results, metrics)
    bad = [name for name, m in metrics.items() if failed(m)]
    for name in bad:
        print(f"horus-sim: {name} finished none of the {metrics[name]['jobs']} jobs: failed", file=sys.stderr)
    return 1 if bad else 0


def _config(args: argparse.Namespace) -> SimConfig:
    try:
        return SimConfig(
            round_s=args.round_s or None,
            event_rounds=not args.no_event_rounds,
            min_gap_s=args.min_gap_s,
            idle_rounds=not args.skip_idle_rounds,
            restart_cost_s=args.restart_cost_s,
            strict=args.strict,
            elastic=args.elastic,
            elastic_seed=args.elastic_seed,
            elastic_known_steps=not args.elastic_unknown_steps,
            loss_curves=args.loss_curves,
            hide_total_steps=args.hide_total_steps,
            min_speed=args.min_speed,
            cross_node_factor=args.cross_node_factor,
            cross_rack_factor=args.cross_rack_factor,
        )
    except ValueError as exc:
        raise InvalidArgument("options", str(exc)) from None


def _cards(args: argparse.Namespace) -> Mapping[str, ModelCard] | None:
    if args.cards is None:
        return None
    if not args.cold_start:
        raise InvalidArgument("cards", "only with --cold-start (warm policies know the table)")
    if args.cards == PACKAGED_CARDS:
        return packaged_cards()
    try:
        return parse_cards(Path(args.cards).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument("cards", f"cannot read {args.cards}: {exc}") from None


def _queues(args: argparse.Namespace) -> QueueConfig | None:
    if args.queues is None:
        if args.min_run_s:
            raise InvalidArgument("min_run_s", "needs --queues")
        return None
    config = load_config(str(args.queues))
    missing = sorted(set(parse_teams(args.teams)) - set(config.queues)) if args.teams else []
    if missing:
        raise InvalidArgument("teams", f"team(s) {', '.join(missing)} are not queues of {args.queues}")
    return config


def _policy(
    name: str,
    model: InterferenceModel,
    queues: QueueConfig | None,
    min_run_s: float,
    round_s: float | None,
    objective: str = "jct",
) -> Policy:
    policy = make_policy(name, model, round_s=round_s, objective=objective)
    return policy if queues is None else QueuedPolicy(policy, queues, min_run_s=min_run_s)


def _one(
    policy: Policy,
    jobs: Sequence[TraceJob],
    nodes: Sequence[Node],
    model: InterferenceModel,
    config: SimConfig,
    force_bar: bool,
    learner: ColdLearner | None = None,
) -> SimResult:
    name = policy.name
    bar = ProgressBar(name, sys.stderr) if force_bar or sys.stderr.isatty() else None
    result = Simulator(jobs, nodes, policy, model, config, bar, learner).run()
    if bar is not None:
        bar.close(len(jobs))
    for warning in result.warnings:
        print(f"horus-sim: {name}: {warning}", file=sys.stderr)
    return result


def _write_outputs(
    args: argparse.Namespace, results: dict[str, SimResult], metrics: dict[str, Metrics]
) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(to_json(metrics) + "\n", encoding="utf-8")
    (out / "run.json").write_text(json.dumps({"trace": args.trace, "cluster": args.cluster}) + "\n")
    if not args.no_plots:
        from horus_core.sim.plots import write_plots

        source = args.trace if args.trace.startswith("synthetic:") else Path(args.trace).name
        title = f"{source} on {args.cluster}"
        write_plots(results, out, title)
