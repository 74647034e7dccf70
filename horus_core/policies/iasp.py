"""``iasp``: two-stage interference-aware placement (IASP + IAPP, Cluster Computing 2020).

Jobs are served in arrival order (priority first). For each job:

- Stage 1, IASP (cluster level): among the nodes that can hold the job, pick the one whose
  residents are predicted to interfere least with it: the mean, over the residents, of the speed
  the pair loses (``2 - s_new - s_res``, from the interference model). An empty node interferes
  with nothing. Ties: the fewest usable GPUs (best fit), then the name.
- Stage 2, IAPP (node level): on that node pick the job's GPUs by predicted speed (idle GPUs at
  1.0, shared ones at the model's co-located speed); a GPU is usable when it has fewer than
  :data:`MAX_SHARE` residents, memory fits and every job on it keeps at least :data:`MIN_SPEED`.
  A gang's predicted speed is its slowest GPU's. Communication cost: a gang may instead take
  idle GPUs over several nodes (the spread module: fewest nodes in one rack, then fewest racks),
  predicted at :data:`COMM_NODE` per extra node and :data:`COMM_RACK` per extra rack (the
  simulator's default crossing cost). The better predicted speed wins, the single node on ties;
  a spread that keeps less than :data:`MIN_SPREAD` is not taken.

A job larger than every node is always spread (idle GPUs only). A job that fits nowhere waits
with a reason; later jobs may pass it.

A job's speed on a GPU depends only on the GPU's state (:data:`State`), so each state's answer is
worked out once per pass; a node's usable GPUs and stage-1 score per signature are kept until a
job is placed on it. ``horus_core/testing/plain_iasp.py`` is the GPU-by-GPU oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from horus_core.interference import InterferenceModel, default_model
from horus_core.model import Action, Assign, Job, JobSpec
from horus_core.policies import spread
from horus_core.policies.base import arrival_order
from horus_core.policies.gputypes import TypeGate
from horus_core.policies.staged import Stages
from horus_core.policies.state import Book
from horus_core.policies.views import View

MAX_SHARE = 2  # residents a GPU may already hold for the new job to join
MIN_SPEED = 0.6  # every job on a shared GPU keeps at least this normalised speed
COMM_NODE = 0.9  # predicted share of its speed a gang keeps per extra node
COMM_RACK = 0.9  # and per extra rack
MIN_SPREAD = 0.8  # a spread over nodes predicted below this is not taken

# A GPU's state, all a job's speed there depends on: its residents' signatures (in order), an
# exclusive one among them, its type and memory.
State = tuple[tuple[str, ...], bool, str, int]


@dataclass(eq=False)
class _Gpu:
    uuid: str
    index: int
    kind: str  # GPU type
    mib: int
    sigs: list[str] = field(default_factory=list)  # its residents' signatures
    exclusive: bool = False

    def state(self) -> State:
        return (tuple(self.sigs), self.exclusive, self.kind, self.mib)


@dataclass(eq=False)
class _Node:
    """One ready node during a pass: its GPUs and, until a job lands on it, its answers."""

    name: str
    rack: str
    kind: str  # its first GPU's type ("" for a node with no ready GPU)
    gpus: list[_Gpu]
    usable: dict[tuple[str, bool], list[tuple[float, _Gpu]]] = field(default_factory=dict)
    score: dict[str, float] = field(default_factory=dict)


@dataclass
class Choice:
    """Where a job goes: the node (rank 0 of a spread), its GPUs and its predicted speed."""

    node: str
    gpus: tuple[str, ...]
    speed: float


def unplaced(spec: JobSpec, min_speed: float) -> str:
    """The reason of a job that fits on no node and no spread."""
    return (
        f"iasp: needs {spec.gpus} GPU(s) on one node, idle or shared without a job "
        f"below {min_speed:g}x (or idle over nodes of one rack)"
    )


def spread_choice(plan: spread.Spread | str, *, forced: bool) -> Choice | str:
    """A gang over idle GPUs of several nodes at the predicted cost, or why not (``forced``: any cost)."""
    if isinstance(plan, str):
        return plan
    speed = COMM_NODE ** (plan.nodes - 1) * COMM_RACK ** (plan.racks - 1)
    if not forced and speed < MIN_SPREAD:
        return f"iasp: a spread over {plan.nodes} nodes is predicted at {speed:.2f}x"
    return Choice(plan.node, plan.gpus, speed)


@dataclass
class IaspPolicy(Stages):
    model: InterferenceModel
    name: str = "iasp"
    min_speed: float = MIN_SPEED
    gate: TypeGate = field(default_factory=TypeGate, repr=False, compare=False)
    book: Book = field(default_factory=Book, init=False, repr=False, compare=False)

    def serve(self, view: View) -> list[Action]:
        pending = view.pending()
        if not pending:
            return []
        return _Pass(self, view).place(arrival_order(pending))


class _Pass:
    """The two stages over one view of a pass (see the module doc)."""

    def __init__(self, policy: IaspPolicy, view: View) -> None:
        self.model, self.min_speed, self.view = policy.model, policy.min_speed, view
        live, layout = view.live(policy.model), view.layout
        names, code = live.table.sigs.names, live.table.code
        self.sig = {j.id: names[c] for j, c in zip(live.pending, code[live.p_slot].tolist(), strict=True)}
        racks = {n.name: n.rack for n in view.snapshot.nodes}
        kinds, start = layout.kinds, layout.node_start.tolist()
        gpu_kind, uuids = layout.gpu_kind.tolist(), layout.gpu_uuids
        indexes = {g.uuid: g.index for n in view.snapshot.nodes for g in n.gpus}
        self.nodes: list[_Node] = []
        gpus: list[_Gpu] = []
        for n, name in enumerate(layout.node_names):
            here = [
                _Gpu(uuids[d], indexes[uuids[d]], *kinds[gpu_kind[d]]) for d in range(start[n], start[n + 1])
            ]
            self.nodes.append(_Node(name, racks[name], here[0].kind if here else "", here))
            gpus += here
        at = layout.index
        for job, slot in zip(live.active, live.a_slot.tolist(), strict=True):
            sig, excl = names[code[slot]], bool(live.table.excl[slot])
            for u in job.gpus:
                if u in at:
                    g = gpus[at[u]]
                    g.sigs.append(sig)
                    g.exclusive = g.exclusive or excl
        self.largest = layout.largest_node
        self.idle = spread.Pool(  # (the idle GPUs, kept as jobs are placed)
            spread.FreeNode(node.name, tuple(g.uuid for g in node.gpus), node.rack, node.kind)
            for node in self.nodes
            if node.gpus
        )
        for node in self.nodes:
            if any(g.sigs for g in node.gpus):
                self.idle.remove(node.name, {g.uuid for g in node.gpus if g.sigs})
        self._speeds: dict[tuple[str, bool, State], float] = {}
        self._lost: dict[tuple[str, str, str], float] = {}  # (sig, resident's, type) -> speed both lose

    def place(self, queue: list[Job]) -> list[Action]:
        actions: list[Action] = []
        for job in queue:
            choice = self._choose(job)
            if isinstance(choice, str):
                actions.append(spread.wait(job, choice, self.view.snapshot))
                continue
            self._take(job, choice)
            actions.append(Assign(job.id, choice.node, choice.gpus, predicted_slowdown=choice.speed))
        return actions

    def _choose(self, job: Job) -> Choice | str:
        spec = job.spec
        if spread.spec_spans(spec, self.largest):  # larger than every node: spread, idle GPUs only
            return self._spread(spread.shape_of(spec, self.largest), forced=True)
        single = self._single(job, self.sig[job.id])
        # (a spread is predicted at most 1.0x and loses ties: only asked where it could win)
        could = spec.gpus > 1 and (single is None or single.speed < 1.0)
        over = self._spread(spread.Shape(spec.gpus), forced=False) if could else None
        options = [c for c in (single, over) if isinstance(c, Choice)]
        if not options:
            return unplaced(spec, self.min_speed)
        return max(options, key=lambda c: (c.speed, c is single))

    def _single(self, job: Job, sig: str) -> Choice | None:
        """Stage 1 then stage 2 on one node."""
        need, excl = job.spec.gpus, job.spec.exclusive
        best: tuple[float, int, str] | None = None
        chosen: list[tuple[float, _Gpu]] = []
        for node in self.nodes:
            usable = node.usable.get((sig, excl))
            if usable is None:
                usable = node.usable[(sig, excl)] = self._usable(node, sig, excl)
            if len(usable) < need:
                continue
            key = (self._score(node, sig), len(usable), node.name)
            if best is None or key < best:
                best, chosen = key, usable
        if best is None:
            return None
        picked = sorted(chosen, key=lambda p: (-p[0], p[1].index))[:need]
        picked.sort(key=lambda p: p[1].index)
        return Choice(best[2], tuple(g.uuid for _, g in picked), min(s for s, _ in picked))

    def _usable(self, node: _Node, sig: str, excl: bool) -> list[tuple[float, _Gpu]]:
        out = []
        for g in node.gpus:
            speed = self._speed(sig, excl, g.state())
            if speed > 0:
                out.append((speed, g))
        return out

    def _speed(self, sig: str, excl: bool, state: State) -> float:
        """A job's predicted speed on a GPU in ``state`` (0: not usable)."""
        sigs, exclusive, kind, mib = state
        if not sigs:
            return 1.0
        if excl or exclusive or len(sigs) >= MAX_SHARE:
            return 0.0
        key = (sig, excl, state)
        speed = self._speeds.get(key)
        if speed is None:
            both = [*sigs, sig]
            speeds = self.model.co_speeds(both, kind) if self.model.fits(both, mib) else (0.0,)
            speed = self._speeds[key] = speeds[-1] if min(speeds) >= self.min_speed else 0.0
        return speed

    def _score(self, node: _Node, sig: str) -> float:
        """Stage 1's score: mean speed lost by the job and each resident of the node, pairwise."""
        score = node.score.get(sig)
        if score is None:
            lost = [self._pair_lost(sig, s, g.kind) for g in node.gpus for s in g.sigs]
            score = node.score[sig] = sum(lost) / len(lost) if lost else 0.0
        return score

    def _pair_lost(self, sig: str, other: str, kind: str) -> float:
        lost = self._lost.get((sig, other, kind))
        if lost is None:
            lost = self._lost[(sig, other, kind)] = 2.0 - sum(self.model.pair_speeds(sig, other, kind))
        return lost

    def _spread(self, shape: spread.Shape, *, forced: bool) -> Choice | str:
        """Idle GPUs over the fewest nodes and racks, at the predicted communication cost."""
        return spread_choice(self.idle.place(shape), forced=forced)

    def _take(self, job: Job, choice: Choice) -> None:
        chosen, sig = set(choice.gpus), self.sig[job.id]
        for node in self.nodes:
            if any(g.uuid in chosen for g in node.gpus):
                node.usable.clear()
                node.score.clear()
                self.idle.remove(node.name, chosen)
                for g in node.gpus:
                    if g.uuid in chosen:
                        g.sigs.append(sig)
                        g.exclusive = g.exclusive or job.spec.exclusive


def make(model: InterferenceModel | None) -> IaspPolicy:
    return IaspPolicy(model or default_model())
