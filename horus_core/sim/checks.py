"""The live master's checks on a policy's actions, mirrored for the simulator.

The master (``master/services/plan.py``) drops, with a log line, any action that would corrupt
the cluster's state: an unknown job, a second action for one job in the same pass, a Preempt of
a job that is not running, an Assign of a job that is not pending, to a node that is not ready,
with the wrong number of GPUs, a GPU of another node, a GPU shared with an exclusive job, or a
GPU that already holds 3 jobs. The simulator applies the same rules, so a policy behaves here as
it would there (``SimConfig.strict`` turns a dropped action into an error, for tests).
"""

from __future__ import annotations

from horus_core.model import Action, Assign, Preempt, Wait
from horus_core.sim.rates import SimulationError
from horus_core.sim.state import ACTIVE, PENDING, SimJob
from horus_core.sim.world import World

MAX_JOBS_PER_GPU = 3


def action_problem(
    action: Action, job: SimJob | None, world: World, acted: set[str]
) -> tuple[str, tuple[int, ...]]:
    """("", GPU indices for an Assign) if the master would apply ``action``, else (why, ())."""
    if not isinstance(action, Assign | Preempt | Wait):
        return f"not an action: {type(action).__name__}", ()
    if job is None:
        return "unknown job (not pending or running)", ()
    if job.id in acted:
        return "a second action for the same job in one round", ()
    if isinstance(action, Preempt):
        return ("", ()) if job.status == ACTIVE else ("the job is not running", ())
    if job.status != PENDING:
        return "the job is not pending", ()
    if isinstance(action, Wait):
        return "", ()
    return _assign_problem(action, job, world)


def _assign_problem(action: Assign, job: SimJob, world: World) -> tuple[str, tuple[int, ...]]:
    if len(action.gpus) != job.spec.gpus:
        return f"needs {job.spec.gpus} distinct GPU(s), got {list(action.gpus)}", ()
    try:
        gpus = world.resolve(action.node, action.gpus)
    except SimulationError as exc:
        return str(exc), ()
    for g in gpus:
        residents = world.residents[g]
        if residents and (job.spec.exclusive or any(r.spec.exclusive for r in residents)):
            return f"GPU {world.uuids[g]} is taken and sharing is excluded", ()
        if len(residents) >= MAX_JOBS_PER_GPU:
            return f"GPU {world.uuids[g]} already holds {len(residents)} jobs", ()
    return "", gpus
