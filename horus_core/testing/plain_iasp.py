"""The test oracle of ``iasp`` (horus_core/policies/iasp.py): the same two stages written the
plain way, every GPU of every node looked at for every job with the model's calls, as the
policy was first written. The policy's stage over the pass state must decide exactly this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Gpu, Job, NodeState
from horus_core.packing.cluster import gpu_type
from horus_core.policies import spread
from horus_core.policies.base import arrival_order
from horus_core.policies.iasp import MAX_SHARE, MIN_SPEED, Choice, spread_choice, unplaced


@dataclass
class _Gpu:
    gpu: Gpu
    rack: str
    residents: list[Job]
    sigs: list[str]
    exclusive: bool = False


@dataclass
class PlainIasp:
    """``iasp``'s stages written job by job and GPU by GPU: decide a snapshot (a view's)."""

    model: InterferenceModel
    min_speed: float = MIN_SPEED

    def decide(self, snapshot: ClusterSnapshot) -> list[Action]:
        pending = snapshot.pending()
        if not pending:
            return []
        nodes = self._state(snapshot)
        largest = max((len(g) for g in nodes.values()), default=0)
        actions: list[Action] = []
        for job in arrival_order(pending):
            choice = self._choose(job, nodes, largest)
            if isinstance(choice, str):
                actions.append(spread.wait(job, choice, snapshot))
                continue
            self._take(job, choice, nodes)
            actions.append(Assign(job.id, choice.node, choice.gpus, predicted_slowdown=choice.speed))
        return actions

    def _state(self, snapshot: ClusterSnapshot) -> dict[str, list[_Gpu]]:
        """Per READY node its healthy GPUs in index order, each with its residents."""
        residents: dict[str, list[Job]] = {}
        for job in snapshot.active():
            for uuid in job.gpus:
                residents.setdefault(uuid, []).append(job)
        out: dict[str, list[_Gpu]] = {}
        for node in snapshot.nodes:
            if node.state is not NodeState.READY:
                continue
            gpus = sorted((g for g in node.gpus if g.healthy), key=lambda g: g.index)
            out[node.name] = [self._gpu(g, node.rack, residents.get(g.uuid, [])) for g in gpus]
        return out

    def _gpu(self, gpu: Gpu, rack: str, residents: list[Job]) -> _Gpu:
        sigs = [self.model.signature(r.spec) for r in residents]
        return _Gpu(gpu, rack, list(residents), sigs, any(r.spec.exclusive for r in residents))

    # ----------------------------------------------------------------- choosing

    def _choose(self, job: Job, nodes: dict[str, list[_Gpu]], largest: int) -> Choice | str:
        if spread.spec_spans(job.spec, largest):  # larger than every node: spread, idle GPUs only
            return self._spread(spread.shape_of(job.spec, largest), nodes, forced=True)
        single = self._single(job, self.model.signature(job.spec), nodes)
        over = self._spread(spread.Shape(job.spec.gpus), nodes, forced=False) if job.spec.gpus > 1 else None
        options = [c for c in (single, over) if isinstance(c, Choice)]
        if not options:
            return unplaced(job.spec, self.min_speed)
        return max(options, key=lambda c: (c.speed, c is single))

    def _single(self, job: Job, sig: str, nodes: dict[str, list[_Gpu]]) -> Choice | None:
        """Stage 1 then stage 2 on one node."""
        need, best, best_key = job.spec.gpus, None, None
        for name, gpus in nodes.items():
            usable = [(s, g) for g in gpus if (s := self._speed(job, sig, g)) > 0]
            if len(usable) < need:
                continue
            key = (self._interference(sig, gpus), len(usable), name)
            if best_key is None or key < best_key:
                best_key, best = key, (name, usable)
        if best is None:
            return None
        name, usable = best
        picked = sorted(usable, key=lambda p: (-p[0], p[1].gpu.index))[:need]
        picked.sort(key=lambda p: p[1].gpu.index)
        return Choice(name, tuple(g.gpu.uuid for _, g in picked), min(s for s, _ in picked))

    def _interference(self, sig: str, gpus: Sequence[_Gpu]) -> float:
        """Stage 1's score: mean speed lost by the job and each resident of the node, pairwise."""
        res = [(s, g.gpu) for g in gpus for s in g.sigs]
        if not res:
            return 0.0
        lost = [2.0 - sum(self.model.pair_speeds(sig, s, gpu_type(gpu))) for s, gpu in res]
        return sum(lost) / len(lost)

    def _speed(self, job: Job, sig: str, g: _Gpu) -> float:
        """The job's predicted speed on ``g`` (0: not usable)."""
        if not g.residents:
            return 1.0
        if job.spec.exclusive or g.exclusive or len(g.residents) >= MAX_SHARE:
            return 0.0
        sigs = [*g.sigs, sig]
        if not self.model.fits(sigs, g.gpu.memory_mib):
            return 0.0
        speeds = self.model.co_speeds(sigs, gpu_type(g.gpu))
        return speeds[-1] if min(speeds) >= self.min_speed else 0.0

    def _spread(self, shape: spread.Shape, nodes: dict[str, list[_Gpu]], *, forced: bool) -> Choice | str:
        """Idle GPUs over the fewest nodes and racks, at the predicted communication cost."""
        free = [_idle(name, gpus) for name, gpus in nodes.items() if gpus]
        return spread_choice(spread.Pool(free).place(shape), forced=forced)

    def _take(self, job: Job, choice: Choice, nodes: dict[str, list[_Gpu]]) -> None:
        chosen = set(choice.gpus)
        sig = self.model.signature(job.spec)
        for gpus in nodes.values():
            for g in gpus:
                if g.gpu.uuid in chosen:
                    g.residents.append(job)
                    g.sigs.append(sig)
                    g.exclusive = g.exclusive or job.spec.exclusive


def _idle(name: str, gpus: Sequence[_Gpu]) -> spread.FreeNode:
    idle = tuple(g.gpu.uuid for g in gpus if not g.residents)
    return spread.FreeNode(name, idle, gpus[0].rack, gpu_type(gpus[0].gpu))
