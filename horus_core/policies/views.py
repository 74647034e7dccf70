"""What one stage of a pass sees (:class:`View`), and the one way to show nodes with GPUs hidden
or jobs placed earlier in the pass.

A view is the pass's state seen through a tier: some GPUs hidden (marked unhealthy), the pending
jobs the tier serves, and the jobs earlier stages placed in this pass, ASSIGNED on their GPUs.
The packer reads it as a mask over the pass's layout; other stages as a snapshot.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection, Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobState, Node
from horus_core.packing.cluster import ClusterLayout
from horus_core.packing.jobs import Live
from horus_core.policies.base import hide_gpus
from horus_core.policies.state import PassState

B = NDArray[np.bool_]
_VIEWS = itertools.count(2)  # (``next`` on it is atomic: decide may run in a thread)


def placed_view(job: Job, node: str, gpus: tuple[str, ...]) -> Job:
    """``job`` ASSIGNED to ``gpus`` (on ``node``), as the stages after the one that placed it see
    it. Its version is one no stored state has (negative, never given twice), so nothing that
    keys a job's state on ``(id, version)`` confuses it with the pending job or another view."""
    return dataclasses.replace(job, state=JobState.ASSIGNED, node=node, gpus=gpus, version=-next(_VIEWS))


def placed_views(jobs: Sequence[Job], actions: Iterable[Action]) -> list[Job]:
    """The jobs of ``jobs`` that ``actions`` assigned, as the stages after see them."""
    by_id = {j.id: j for j in jobs}
    return [
        placed_view(by_id[a.job_id], a.node, a.gpus)
        for a in actions
        if isinstance(a, Assign) and a.job_id in by_id
    ]


class View:
    """The pass's state through one tier. ``jobs``: those shown (None: the snapshot's);
    ``hidden``: per GPU of the layout; ``placed``: ids placed earlier in the pass; ``ranked``:
    the pending jobs carry their tier's priorities."""

    def __init__(
        self,
        state: PassState,
        jobs: tuple[Job, ...] | None = None,
        hidden: B | None = None,
        placed: frozenset[str] = frozenset(),
        ranked: bool = False,
    ) -> None:
        self.state, self.jobs, self.hidden, self.placed, self.ranked = state, jobs, hidden, placed, ranked
        # made when first asked (plain attributes: a simulator round asks several times)
        self._nodes: tuple[Node, ...] | None = None
        self._snapshot: ClusterSnapshot | None = None
        self._layout: ClusterLayout | None = None
        self._present: frozenset[str] | None = None

    # -------------------------------------------------------------------- derived views

    def hide(self, mask: B) -> View:
        """This view with the GPUs of ``mask`` (over the pass's layout) hidden too."""
        hidden = mask if self.hidden is None else self.hidden | mask
        return View(self.state, self.jobs, hidden, self.placed, self.ranked)

    def hide_uuids(self, uuids: Iterable[str]) -> View:
        """This view with the GPUs ``uuids`` hidden too (those not ready: already)."""
        index = self.state.layout.index
        at = [index[u] for u in uuids if u in index]
        mask = np.zeros(self.state.layout.n_gpus, np.bool_)
        mask[at] = True
        return self.hide(mask)

    def only_uuids(self, uuids: Collection[str]) -> View:
        """This view with every GPU but ``uuids`` hidden."""
        keep = self.state.layout.index
        mask = np.ones(self.state.layout.n_gpus, np.bool_)
        mask[[keep[u] for u in uuids if u in keep]] = False
        return self.hide(mask)

    def serving(
        self, active: Sequence[Job], placed: Sequence[Job], pending: Sequence[Job], *, ranked: bool = False
    ) -> View:
        """The same GPUs, showing ``active`` (the pass's active jobs), then ``placed`` (views of
        the jobs placed earlier in the pass, :func:`placed_view`), then ``pending``: a tier."""
        ids = self.placed | {j.id for j in placed}
        return View(self.state, (*active, *placed, *pending), self.hidden, ids, ranked or self.ranked)

    def with_placed(self, job: Job, node: str, gpus: tuple[str, ...]) -> View:
        """This view with pending ``job`` placed on ``gpus`` (where it stands in the jobs)."""
        placed = placed_view(job, node, gpus)
        jobs = tuple(placed if j.id == job.id else j for j in self.all_jobs)
        return View(self.state, jobs, self.hidden, self.placed | {job.id}, self.ranked)

    # -------------------------------------------------------------------- as a snapshot

    @property
    def all_jobs(self) -> tuple[Job, ...]:
        return self.state.snapshot.jobs if self.jobs is None else self.jobs

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The snapshot's nodes, the hidden GPUs marked unhealthy."""
        if self._nodes is None:
            nodes = self.state.snapshot.nodes
            if self.hidden is not None and self.hidden.any():
                uuids = self.state.layout.gpu_uuids
                nodes = hide_gpus(nodes, {uuids[i] for i in np.flatnonzero(self.hidden).tolist()})
            self._nodes = nodes
        return self._nodes

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The view as a snapshot (the pass's own where it hides and moves nothing)."""
        if self._snapshot is None:
            s, nodes = self.state.snapshot, self.nodes
            if self.jobs is not None:
                s = ClusterSnapshot(nodes, self.jobs)
            elif nodes is not s.nodes:
                s = s.with_nodes(nodes)
            self._snapshot = s
        return self._snapshot

    def pending(self) -> tuple[Job, ...]:
        return self.snapshot.pending()

    def active(self) -> tuple[Job, ...]:
        return self.snapshot.active()

    # -------------------------------------------------------------------- for the packer

    @property
    def layout(self) -> ClusterLayout:
        """The pass's layout without the hidden GPUs."""
        if self._layout is None:
            layout, hidden = self.state.layout, self.hidden
            self._layout = layout if hidden is None or not hidden.any() else layout.masked(hidden)
        return self._layout

    @property
    def present(self) -> frozenset[str]:
        """The GPU types of the view's ready GPUs."""
        if self._present is None:
            self._present = self.layout.present
        return self._present

    def live(self, model: InterferenceModel) -> Live:
        """The view's pending and active jobs as the job table's slots (the pass's own scan)."""
        live = self.state.live(model)
        if self.jobs is None and not self.ranked:
            return live
        return live.view(self.pending(), self.active(), self.placed, self.ranked)
