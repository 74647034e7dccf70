"""An example placement rule, ``worst-fit``: each job, in arrival order, on whole GPUs of the
node with the most free GPUs (``docs/adding-a-policy.md``, section 3), which spreads the load
and leaves room on every node for the jobs that come next.

    horus-sim --policy-module examples/worst_fit_policy.py --policies worst-fit,fifo ...
    horus-master --policy-module examples/worst_fit_policy.py --policy worst-fit ...

A job larger than every node waits (``fifo`` spreads such a gang over nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.policies.api import Action, Assign, Placing, View, Wait, arrival_order, free_gpus, register


@dataclass
class WorstFit(Placing):
    name: str = "worst-fit"

    def serve(self, view: View) -> list[Action]:
        """An Assign or a Wait for every pending job of ``view``."""
        free = free_gpus(view)  # node -> its free GPUs (uuids)
        actions: list[Action] = []
        for job in arrival_order(view.pending()):
            need = job.spec.gpus
            node = max(sorted(free), key=lambda n: len(free[n]), default=None)  # (ties: first name)
            if node is None or len(free[node]) < need:
                actions.append(Wait(job.id, f"no node has {need} free GPUs"))
                continue
            actions.append(Assign(job.id, node, tuple(free[node][:need])))
            free[node] = free[node][need:]
        return actions


register("worst-fit", lambda model: WorstFit())
