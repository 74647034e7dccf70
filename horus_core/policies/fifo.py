"""``fifo``: exclusive GPUs in arrival order, what Kubernetes and Slurm do. The baseline.

A job gets whole GPUs that nobody else uses (a gang: all or none) on one node (best fit); a job
larger than every node (or whose shape asks for several) is spread over the fewest nodes of
one rack, else the fewest racks (:mod:`horus_core.policies.spread`). Jobs are served in
arrival order; one that does not fit waits with a reason and later jobs may pass it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action
from horus_core.policies._wide import free_on, place_wide
from horus_core.policies.base import busy_gpu_uuids
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.staged import Stages
from horus_core.policies.state import Book
from horus_core.policies.views import View


@dataclass
class FifoPolicy(Stages):
    name: str = "fifo"
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)
    # Read only for the GPU types a job cannot run on (throughput 0 in the table).
    model: InterferenceModel = field(default_factory=default_model, repr=False, compare=False)
    book: Book = field(default_factory=Book, init=False, repr=False, compare=False)

    def serve(self, view: View) -> list[Action]:
        """Every pending job placed as the packing policies place their gangs across nodes."""
        s, layout = view.snapshot, view.layout
        busy = busy_gpu_uuids(s.jobs).keys()
        free = free_on(layout, {n.name: n.rack for n in s.nodes}, busy)
        return place_wide(s, layout.largest_node, s.pending(), (), busy, free)[0]
