"""``binpack``: naive co-location by free memory, blind to interference.

Jobs in arrival order; each goes to the GPU (a gang: the node) with the least memory left free
after placing it, up to 3 jobs per GPU, as long as memory fits (the only thing it checks,
together with the table's out-of-memory pairs). What Gavel calls "fifo with packing": it fills
GPUs, and pays for it in interference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.packing import PackParams, codes
from horus_core.policies._order import arrival_positions
from horus_core.policies._packing import Packer
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.reasons import interference_text

PARAMS = PackParams(mode=codes.MODE_BINPACK, max_per_gpu=3)


@dataclass
class BinpackPolicy:
    model: InterferenceModel
    name: str = "binpack"
    packer: Packer = field(default_factory=Packer, init=False, repr=False, compare=False)
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.gate.decide(snapshot, now, self._decide, self.model)

    def _decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.packer.pack(
            snapshot, self.model, PARAMS, interference_text(0.0),
            arrival_positions,
        )  # fmt: skip


def make(model: InterferenceModel | None) -> BinpackPolicy:
    return BinpackPolicy(model or default_model())
