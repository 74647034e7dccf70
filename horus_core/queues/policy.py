"""The one seam that makes any policy honour queues, quotas, fair share and priority preemption.

:class:`QueuedPolicy` wraps a policy's ``decide``. Each pass it

1. charges the users' fair share with what their jobs held since the last pass;
2. orders the pending jobs (priority class, then the user's fair-share factor, then ``priority``,
   then arrival) and admits them against their queue: first those that keep their queue within
   its nominal quota, then those that borrow up to its borrowing limit; the rest wait with code
   ``QuotaExceeded``;
3. lets the inner policy's stages place the guaranteed jobs, then (with those shown running)
   the borrowing ones, then jobs of queues at their limit on only the GPUs their queue holds:
   one tier each, a view of the one pass state the inner policy began (``Staged.run``; a policy
   written only as ``decide`` decides each view as a snapshot), and drops any assignment that
   would take a queue past its limit on the GPUs actually chosen; the inner policy's own
   preemptions are kept only where they take nothing from another queue's quota;
4. for a guaranteed job still waiting, preempts borrowed jobs of other queues (reclaim, code
   ``WaitingForReclaim``); for a job of a class that may preempt, jobs of lower classes
   (code ``Priority``), and holds the freed GPUs for it. No job is preempted before it has run
   ``min_run_s`` seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from horus_core import reasoncodes as rc
from horus_core.model import Action, Assign, ClusterSnapshot, Job, Preempt, Wait
from horus_core.policies.base import Policy
from horus_core.policies.staged import Staged, staged
from horus_core.policies.state import Book, PassState
from horus_core.policies.views import View, placed_views
from horus_core.queues.config import QueueConfig
from horus_core.queues.fairshare import FairShare
from horus_core.queues.idle import IdleGpus, Victims, usable_types
from horus_core.queues.ledger import WAIT_PRIORITY, WAIT_QUOTA, WAIT_RECLAIM, Ledger, demand, job_queue
from horus_core.queues.ranking import Memo, rank_key, ranked
from horus_core.queues.victims import Candidate, pick

RESERVE_S = 300.0  # how long GPUs freed by preemption wait for the job they were freed for
_GENERIC = ("", rc.RESOURCES)  # a wait for GPUs: behind a higher class it says Priority instead


@dataclass
class Admitted:
    guaranteed: list[Job] = field(default_factory=list)
    borrowing: list[Job] = field(default_factory=list)
    held: dict[str, Wait] = field(default_factory=dict)
    # Over its queue's limit, but of a class that may preempt lower classes of its queue.
    over: list[Job] = field(default_factory=list)
    # Over its queue's limit, but it may share a GPU the queue already holds (costs no quota).
    packing: dict[str, list[Job]] = field(default_factory=dict)


@dataclass
class QueuedPolicy:
    """``inner`` with queues and quotas (see the module doc); ``config`` may be swapped live."""

    inner: Policy
    config: QueueConfig
    min_run_s: float = 0.0
    name: str = field(init=False)  # the inner policy's
    fair: FairShare = field(init=False)
    _staged: Staged = field(init=False, repr=False)  # the inner policy as stages
    _shares: dict[tuple[str, str], float] = field(default_factory=dict, repr=False)
    _ranked: Memo = field(default_factory=dict, repr=False)
    # job id -> (the GPUs preemptions freed for it, when): see _reservations
    _reserved: dict[str, tuple[frozenset[str], float, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.fair = FairShare(self.config.half_life_s)
        self.name = self.inner.name
        self._staged = staged(self.inner)

    def reload(self, config: QueueConfig) -> None:
        """Use ``config`` from the next pass on; attained usage is kept."""
        self.config = config
        self.fair.half_life_s = config.half_life_s

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        cfg = self.config
        state = self._staged.begin(snapshot, now)
        types, book = state.types, state.book
        active = list(snapshot.active())
        self.fair.charge(now)
        self._shares.clear()
        if len(self._ranked) > 2 * len(snapshot.jobs) + 1024:
            self._ranked.clear()
        ledger = Ledger.of(cfg, active, types)
        admitted = self.admit(snapshot.pending(), ledger)
        inner_preempts: dict[str, Preempt] = {}
        waits: dict[str, Wait] = dict(admitted.held)
        running = list(active)
        assigns = self._place(state, admitted, running, ledger, waits, inner_preempts)
        preempts = self._preempt(snapshot, running, admitted, waits, inner_preempts, ledger, book, now)
        self._behind_higher_class([*admitted.guaranteed, *admitted.borrowing], waits)
        jobs = {j.id: j for j in snapshot.pending()}
        for a in assigns:
            if a.job_id in jobs:
                book.placed(jobs[a.job_id], now)
        holding = [j for j in running if j.id not in preempts]
        self.fair.hold(((job_queue(cfg, j), j.spec.owner), len(j.gpus)) for j in holding)
        out: list[Action] = [*assigns, *preempts.values()]
        placed = {a.job_id for a in assigns}
        return out + [
            waits.get(j.id) or Wait(j.id, "pending") for j in snapshot.pending() if j.id not in placed
        ]

    # ------------------------------------------------------------------------------ admission

    def share(self, job: Job) -> float:
        """The fair-share factor of the job's user within its queue (memoised for the pass)."""
        q = job_queue(self.config, job)
        key = (q, job.spec.owner)
        hit = self._shares.get(key)
        if hit is None:
            queue = self.config.queues.get(q)
            users = [job.spec.owner] if queue is None else list(queue.users)
            weights = {} if queue is None else queue.weights
            hit = self._shares[key] = self.fair.factor(q, job.spec.owner, users, weights)
        return hit

    def order(self, pending: Sequence[Job]) -> list[Job]:
        """Higher class, then higher fair-share factor, then ``priority``, then arrival."""
        level = self.config.level_of

        def key(j: Job) -> tuple[float, ...]:
            return (-level(j.spec.priority_class), -self.share(j), -j.spec.priority, j.submitted_at)

        return sorted(pending, key=lambda j: (key(j), j.id))

    def _rank(self, job: Job) -> int:
        levels = sorted({pc.level for pc in self.config.classes.values()})
        level = self.config.level_of(job.spec.priority_class)
        return rank_key(levels.index(level) if level in levels else 0, self.share(job))

    def admit(self, pending: Sequence[Job], ledger: Ledger) -> Admitted:
        """Split the pending jobs into guaranteed, borrowing and held back (pure given state)."""
        cfg, out = self.config, Admitted()
        planned = ledger.copy()
        for job in self.order(pending):
            q, need = job_queue(cfg, job), demand(job)
            queue = cfg.queues.get(q)
            if queue is None:
                out.held[job.id] = Wait(job.id, f"queue {q!r} is not configured", WAIT_QUOTA)
            elif planned.within_nominal(q, need):
                out.guaranteed.append(job)
                planned.plan(q, need)
            elif planned.within_limit(q, need):
                out.borrowing.append(job)
                planned.plan(q, need)
            else:
                why = (
                    f"queue {q} holds or has queued ahead {planned.total(q)} GPU(s); its quota is "
                    f"{queue.nominal_total} + {queue.borrowing_limit} borrowed"
                )
                out.held[job.id] = Wait(job.id, why, WAIT_QUOTA)
                if cfg.may_preempt(job.spec.priority_class):
                    out.over.append(job)
                if not job.spec.exclusive and ledger.held.get(q):
                    out.packing.setdefault(q, []).append(job)
        return out

    def _place(
        self,
        state: PassState,
        admitted: Admitted,
        running: list[Job],
        ledger: Ledger,
        waits: dict[str, Wait],
        inner_preempts: dict[str, Preempt],
    ) -> list[Assign]:
        """The inner policy's tiers: guaranteed, borrowing, then packing beside a queue's own jobs.

        Its own preemptions (e.g. least attained service) never go against a quota: in the first
        tier, of jobs of the same queues or of borrowing queues; in the borrowing tier, of jobs
        of the same queues only (one of a team's jobs for another)."""
        cfg, active, now = self.config, list(running), state.now
        top = View(state)
        reserved = self._reservations(admitted, now)
        others = top.hide_uuids(reserved) if reserved else top
        queues = {job_queue(cfg, j) for j in admitted.guaranteed}
        victims = {j.id for j in active if (q := job_queue(cfg, j)) in queues or ledger.borrowed(q) > 0}
        placed: list[Job] = []
        tier1 = (admitted.guaranteed, active, placed, running, ledger, waits, inner_preempts, victims)
        assigns = self._tier(top, *tier1)
        borrowers = {job_queue(cfg, b) for b in admitted.borrowing}
        mine = {j.id for j in active if job_queue(cfg, j) in borrowers}
        tier2 = (admitted.borrowing, active, placed, running, ledger, waits, inner_preempts, mine)
        assigns += self._tier(others, *tier2)
        if admitted.packing:  # at their limit: only the GPUs their queues hold (checked after)
            held = set().union(*(ledger.held.get(q, set()) for q in admitted.packing)) - reserved
            jobs = [j for group in admitted.packing.values() for j in group]
            no_waits: dict[str, Wait] = {}
            tier3 = (jobs, active, placed, running, ledger, no_waits, inner_preempts, set[str]())
            assigns += self._tier(top.only_uuids(held), *tier3)
        for jid, (_, _, code) in self._reserved.items():  # still waiting for what was freed for it
            if jid in waits:
                waits[jid] = Wait(
                    jid, f"{waits[jid].reason} (the GPUs preempted for it are held for it)", code
                )
        return assigns

    def _tier(
        self,
        view: View,
        tier: Sequence[Job],
        active: list[Job],
        placed: list[Job],
        running: list[Job],
        ledger: Ledger,
        waits: dict[str, Wait],
        preempts: dict[str, Preempt],
        victims: set[str],
    ) -> list[Assign]:
        """One tier of the inner policy beside ``active`` and the jobs ``placed`` earlier (both
        lists grow with what it places, ``running`` too); of its preemptions, those of
        ``victims`` are kept."""
        if not tier:
            return []
        shown = ranked(tier, self._rank, self.inner.name, self._ranked)
        rewritten = any(a is not b for a, b in zip(shown, tier, strict=True))
        actions = self._staged.run(view.state, view.serving(active, placed, shown, ranked=rewritten))
        kept = self._keep(actions, tier, ledger, waits, preempts, victims, view.state)
        views = placed_views(tier, kept)
        placed += views
        running += views
        return kept

    def _keep(
        self,
        actions: Sequence[Action],
        tier: Sequence[Job],
        ledger: Ledger,
        waits: dict[str, Wait],
        preempts: dict[str, Preempt],
        victims: set[str],
        state: PassState,
    ) -> list[Assign]:
        """The inner policy's assignments that keep their queue within its limit; the rest wait."""
        by_id = {j.id: j for j in tier}
        out: list[Assign] = []
        for a in actions:
            if (
                isinstance(a, Preempt)
                and a.job_id in victims
                and self._may_preempt(a.job_id, state.book, state.now)
            ):
                preempts.setdefault(a.job_id, a)
            elif isinstance(a, Wait) and a.job_id in by_id:
                waits[a.job_id] = a
            elif isinstance(a, Assign) and a.job_id in by_id:
                q = job_queue(self.config, by_id[a.job_id])
                if ledger.fits(q, a.gpus):
                    ledger.hold(q, a.gpus)
                    out.append(a)
                else:
                    chosen = sorted({ledger.types.get(u, "") for u in a.gpus})
                    why = f"queue {q} would pass its borrowing limit on {', '.join(chosen)} GPUs"
                    waits[a.job_id] = Wait(a.job_id, why, WAIT_QUOTA)
        return out

    # ----------------------------------------------------------------------------- preemption

    def _preempt(
        self,
        snapshot: ClusterSnapshot,
        running: list[Job],
        admitted: Admitted,
        waits: dict[str, Wait],
        preempts: dict[str, Preempt],
        ledger: Ledger,
        book: Book,
        now: float,
    ) -> dict[str, Preempt]:
        """Reclaim for waiting guaranteed jobs, then priority preemption (see the module doc)."""
        cfg = self.config
        active = {j.id: j for j in snapshot.active()}
        cands = [
            Candidate(j, job_queue(cfg, j), cfg.level_of(j.spec.priority_class), book.started_at(j, now))
            for j in running
            if j.id in active and j.id not in preempts and self._may_preempt(j.id, book, now)
        ]
        idle = IdleGpus.of(snapshot, running)
        pool = Victims(cands, idle)
        budget = {q: ledger.borrowed(q) for q in cfg.queues}
        for job in admitted.guaranteed + admitted.borrowing:
            if job.id not in waits:
                continue
            types = usable_types(self.inner, job, snapshot, now, ledger)
            short = demand(job) - idle.usable(job, types)
            if short <= 0:
                idle.take(job, types, demand(job))  # idle GPUs it may get once what holds it back clears
                continue
            mine = pool.of(types)  # only jobs on GPUs it could use
            chosen, code, why = self._victims(job, job in admitted.guaranteed, mine, short, budget)
            for c in chosen:
                pool.remove(c)
                budget[c.queue] = budget.get(c.queue, 0) - c.gpus
                preempts[c.job.id] = Preempt(c.job.id, f"{why} (for {job.id})")
            if chosen:
                self._reserve(job.id, (u for c in chosen for u in c.job.gpus), now, code)
                idle.add(u for c in chosen for u in c.job.gpus)
                idle.take(job, types, demand(job))
                waits[job.id] = Wait(job.id, f"{why}: preempting {len(chosen)} job(s)", code)
        for job in admitted.over:
            q, level = job_queue(cfg, job), cfg.level_of(job.spec.priority_class)
            types = usable_types(self.inner, job, snapshot, now, None)
            mine = pool.of(types)
            chosen = pick(mine, demand(job), lambda c: c.queue == q and c.level < level)  # noqa: B023
            for c in chosen:
                pool.remove(c)
                preempts[c.job.id] = Preempt(
                    c.job.id, f"a job of a higher class needs queue {q}'s quota (for {job.id})"
                )
            if chosen:
                self._reserve(job.id, (u for c in chosen for u in c.job.gpus), now, WAIT_PRIORITY)
                waits[job.id] = Wait(
                    job.id,
                    f"queue {q} is at its quota: preempting {len(chosen)} job(s) of lower classes",
                    WAIT_PRIORITY,
                )
        return preempts

    def _victims(
        self, job: Job, guaranteed: bool, cands: list[Candidate], short: int, budget: dict[str, int]
    ) -> tuple[list[Candidate], str, str]:
        """Who to preempt for ``job`` (reclaim if it is within its quota, else by class)."""
        cfg = self.config
        q, level = job_queue(cfg, job), cfg.level_of(job.spec.priority_class)
        if guaranteed:
            chosen = pick(cands, short, lambda c: c.queue != q, budget)
            if chosen:
                return chosen, WAIT_RECLAIM, f"queue {q} reclaims its quota"
        if not cfg.may_preempt(job.spec.priority_class):
            return [], "", ""

        def lower(c: Candidate) -> bool:
            return c.level < level and (c.queue == q or budget.get(c.queue, 0) >= c.gpus)

        why = f"a job of a higher class ({job.spec.priority_class or cfg.default_class}) needs the GPUs"
        return pick(cands, short, lower), WAIT_PRIORITY, why

    def _behind_higher_class(self, jobs: Sequence[Job], waits: dict[str, Wait]) -> None:
        """Code ``Priority`` for a job left waiting (with no code, or the generic ``Resources``)
        while a job of a higher class of its queue waits too: it is served after that one."""
        cfg, top = self.config, dict[str, int]()
        for j in jobs:
            if j.id in waits:
                q = job_queue(cfg, j)
                top[q] = max(top.get(q, -(2**62)), cfg.level_of(j.spec.priority_class))
        for j in jobs:
            w = waits.get(j.id)
            if (
                w is not None
                and w.code in _GENERIC
                and cfg.level_of(j.spec.priority_class) < top[job_queue(cfg, j)]
            ):
                waits[j.id] = Wait(
                    j.id, f"behind higher-priority jobs of its queue; {w.reason}", WAIT_PRIORITY
                )

    def _reserve(self, job_id: str, gpus: Iterable[str], now: float, code: str) -> None:
        """Hold the GPUs just freed for ``job_id`` beside those freed for it before: a reclaim that
        takes several passes must not hand back what an earlier pass freed (its victims would
        come back to them and be preempted again). The hold ends ``RESERVE_S`` after the first."""
        held, since, _ = self._reserved.get(job_id, (frozenset(), now, code))
        self._reserved[job_id] = (held | frozenset(gpus), since, code)

    def _reservations(self, admitted: Admitted, now: float) -> set[str]:
        """GPUs freed by preemption for jobs still waiting for them (at most ``RESERVE_S``): hidden
        from the borrowing and packing tiers. Their owners move to the front tier, which sees
        them (as do the other jobs within their quota: hiding them there too was tried and made
        the two-team runs slightly worse, e.g. horus+ 19.34 -> 19.56 h)."""
        waiting = {j.id: j for j in [*admitted.guaranteed, *admitted.borrowing]}
        self._reserved = {
            jid: r for jid, r in self._reserved.items() if jid in waiting and now - r[1] < RESERVE_S
        }
        owners = [waiting[jid] for jid in self._reserved]
        admitted.borrowing = [j for j in admitted.borrowing if j.id not in self._reserved]
        admitted.guaranteed = [*admitted.guaranteed, *(j for j in owners if j not in admitted.guaranteed)]
        return set().union(*(r[0] for r in self._reserved.values()))

    def _may_preempt(self, job_id: str, book: Book, now: float) -> bool:
        """Whether the job has run its minimum run time since it was assigned (by this wrapper)
        or first seen holding GPUs (a job not seen active: yes)."""
        stint = book.stints.get(job_id)
        if stint is None or not stint.job.state.active:
            return True
        return now - book.started_at(stint.job, now) >= self.min_run_s
