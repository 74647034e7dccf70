"""``horus``, ``horus-util`` and ``horus-paper``: interference-aware greedy packing (DESIGN §4.2).

``horus`` serves its queue least attained service first (Tiresias-style, no job lengths needed):
priority first, then the job's level of GPU-seconds run so far (boundaries growing
geometrically, :mod:`horus_core.policies.attained`), FIFO within a level; a running job of a
higher level than the first job left waiting is preempted once its attempt has run 6 minutes.
A job whose progress reports give a confident estimate of its remaining work (steps left at its
measured speed, :mod:`horus_core.policies.remaining`) is served shortest remaining work first
instead: its level is that of its remaining GPU-seconds, and it goes first within its level.
``horus-util`` and ``horus-paper`` serve it lowest predicted utilisation first (priority first,
arrival breaks ties) and never preempt. All use a look-ahead of 5: after 6 jobs could not be
placed the rest wait, so a big job is not passed forever.

Each job goes to the GPU (a gang: the node) of lowest Horus cost

    1.3 * (used + mem) / capacity + util_cost / 100 + jobs_on(gpu),
    util_cost = 1.6 * over if over > 0 else -over,  over = util(gpu) + util_peak(job) - 100,

at most 3 jobs per GPU and more than 500 MiB left free (the packing kernel, Numba). The
``jobs_on`` term makes an idle GPU always cheapest, so jobs share only when the cluster is busy.

``horus-paper`` is that rule alone, as the authors' simulator implements it: co-location is
limited only by memory, and the cost steers jobs away from oversubscribed GPUs.

``horus`` (the default) also reads the pair table directly (triples: products of pair speeds):
a job may join a GPU only if that raises the GPU's summed normalised speed by at least 0.15
(co-location must beat taking turns by 15 %) and nobody there falls below 0.3x. Measured with
the simulator (``horus-sim``) (average JCT in hours, Philly-derived Gavel traces, V100s), with
the utilisation order (now ``horus-util``; ``horus`` with LAS: docs/evaluation.md §11):

    trace / GPUs        horus-paper  floor 0.8x  horus  horus+  fifo  binpack  gandiva  lucid
    2869ce_cap / 16        56.8        18.7      13.7   14.6   29.0   138.1    14.6    14.2
    e13805_400_cap / 16    77.7        96.9      35.4   32.3   77.3   116.1    56.9    46.7
    2869ce_cap / 32        11.5         8.4       8.2    8.2    9.2    16.9     8.2     8.2

A fixed speed floor (the first idea, 0.8x) refuses too much on loaded clusters; the gain rule
packs exactly the pairs that finish work faster together than apart.

On mixed GPU types ``make`` adds the heterogeneity-aware tiers of :mod:`.gputypes` (a job's fast
types first, much slower ones only after a bounded wait): 13.1 -> 8.0 h on 2869ce_cap with
24 K80 + 24 P100 + 24 V100; a single-type cluster decides exactly as above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.packing import PackParams, codes
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies._order import las_positions, util_positions
from horus_core.policies._packing import Ix, Packer
from horus_core.policies.attained import Attained
from horus_core.policies.gputypes import HeteroRule, TypeGate
from horus_core.policies.reasons import interference_text
from horus_core.policies.remaining import HearsProgress, RemainingWork

MIN_SPEED = 0.3
MIN_GAIN = 0.15
LOOKAHEAD = 5


@dataclass
class HorusPolicy:
    model: InterferenceModel
    name: str = "horus"
    min_speed: float = MIN_SPEED
    min_gain: float = MIN_GAIN
    lookahead: int = LOOKAHEAD
    las: Attained | None = None  # None: lowest predicted utilisation first (``horus-util``)
    packer: Packer = field(default_factory=Packer, init=False, repr=False, compare=False)
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)

    @property
    def params(self) -> PackParams:
        return PackParams(
            mode=codes.MODE_HORUS,
            max_per_gpu=3,
            min_speed=self.min_speed,
            min_gain=self.min_gain,
            lookahead=self.lookahead,
        )

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        return self.gate.decide(snapshot, now, self._decide, self.model)

    def _decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        refused = interference_text(self.min_speed, self.min_gain)
        if self.las is None:
            return self.packer.pack(snapshot, self.model, self.params, refused, self._order)
        self.las.observe(snapshot, now)
        actions = self.packer.pack(snapshot, self.model, self.params, refused, self._order)
        return [*self.las.preempts(snapshot, actions, now), *actions]

    def _order(self, live: Live, layout: ClusterLayout) -> Ix:
        if self.las is None:
            return util_positions(live)
        ids = live.p_ids
        left = self.las.left_of(ids) if self.las.work is not None else None
        return las_positions(live, self.las.levels_of(ids), left=left)


@dataclass
class HorusProgressPolicy(HorusPolicy, HearsProgress):
    """``horus`` hearing progress reports (a ProgressObserver; the other variants are not, so the
    simulator does not report to them)."""

    def progress_work(self) -> RemainingWork | None:
        return self.las.work if self.las is not None else None


def make(model: InterferenceModel | None) -> HorusPolicy:
    las = Attained(work=RemainingWork())
    return HorusProgressPolicy(model or default_model(), gate=TypeGate(HeteroRule()), las=las)


def make_las(model: InterferenceModel | None) -> HorusPolicy:
    """``horus-las``: ``horus`` with least attained service alone (progress reports ignored)."""
    return HorusPolicy(
        model or default_model(), name="horus-las", gate=TypeGate(HeteroRule()), las=Attained()
    )


def make_util(model: InterferenceModel | None) -> HorusPolicy:
    return HorusPolicy(model or default_model(), name="horus-util", gate=TypeGate(HeteroRule()))


def make_paper(model: InterferenceModel | None) -> HorusPolicy:
    return HorusPolicy(model or default_model(), name="horus-paper", min_speed=0.0, min_gain=-math.inf)
