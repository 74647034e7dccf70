"""``fifo``: exclusive GPUs in arrival order, what Kubernetes and Slurm do. The baseline.

A job gets whole GPUs that nobody else uses, all on one node (a gang: all or none). Jobs are
served in arrival order; one that does not fit waits with a reason and later jobs may pass it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, Assign, ClusterSnapshot, Wait
from horus_core.policies.base import arrival_order, busy_gpu_uuids, gpus_by_node
from horus_core.policies.gputypes import TypeGate


@dataclass
class FifoPolicy:
    name: str = "fifo"
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)
    # Read only for the GPU types a job cannot run on (throughput 0 in the table).
    model: InterferenceModel = field(default_factory=default_model, repr=False, compare=False)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.gate.decide(snapshot, now, self._decide, self.model)

    def _decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        busy = busy_gpu_uuids(snapshot.jobs)
        by_node = gpus_by_node(snapshot)
        free = {node: [g.uuid for g in gpus if g.uuid not in busy] for node, gpus in by_node.items()}
        biggest = max((len(g) for g in by_node.values()), default=0)
        actions: list[Action] = []
        for job in arrival_order(snapshot.pending()):
            need = job.spec.gpus
            # Best fit: the node with the fewest free GPUs that still holds the whole gang.
            fits = [(len(uuids), node) for node, uuids in free.items() if len(uuids) >= need]
            if not fits:
                largest = max((len(u) for u in free.values()), default=0)
                code = rc.GANG_TOO_LARGE if need > biggest else rc.RESOURCES
                text = f"needs {need} free GPU(s) on one node, largest free set is {largest}"
                actions.append(Wait(job.id, text, code))
                continue
            _, node = min(fits)
            chosen, free[node] = free[node][:need], free[node][need:]
            actions.append(Assign(job.id, node, tuple(chosen)))
        return actions
