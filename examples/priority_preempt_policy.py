"""An example preemption rule, ``priority-preempt``: ``fifo``'s placement, and a job that waits
preempts running jobs of a lower priority (the lowest first, then the latest started) until
enough GPUs would be free for it (``docs/adding-a-policy.md``, section 4).

    horus-sim --policy-module examples/priority_preempt_policy.py --policies priority-preempt,fifo ...
    horus-master --policy-module examples/priority_preempt_policy.py --policy priority-preempt ...

The preempted jobs go back to the queue; the next pass places the waiting job (higher priority
first) on the GPUs they freed.
"""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.policies.api import (
    Action,
    Placing,
    Preempt,
    View,
    Wait,
    arrival_order,
    free_gpus,
    place_exclusive,
    register,
    running_for,
)


@dataclass
class PriorityPreempt(Placing):
    name: str = "priority-preempt"

    def serve(self, view: View) -> list[Action]:
        actions = place_exclusive(view)
        waiting = {a.job_id for a in actions if isinstance(a, Wait)}
        free = sum(map(len, free_gpus(view).values()))
        total = sum(len(n.gpus) for n in view.snapshot.nodes)
        now, preempts = view.state.now, list[Action]()
        victims = sorted(view.active(), key=lambda j: (j.spec.priority, running_for(j, now), j.id))
        for job in arrival_order([j for j in view.pending() if j.id in waiting]):
            if job.spec.gpus > total:
                continue  # (it never fits: preempting would not help)
            lower = [v for v in victims if v.spec.priority < job.spec.priority]
            while free < job.spec.gpus and lower:
                victim = lower.pop(0)
                victims.remove(victim)
                free += len(victim.gpus)
                preempts.append(Preempt(victim.id, f"preempted for {job.id} (priority {job.spec.priority})"))
            free -= job.spec.gpus
        return [*preempts, *actions]


register("priority-preempt", lambda model: PriorityPreempt())
