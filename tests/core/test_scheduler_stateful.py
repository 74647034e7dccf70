"""One hypothesis state machine of the whole scheduling pass of the master with queues, quotas,
priority classes and nodes out of service (issue 13).

The pieces are the ones the master runs: its node registry and service book (cordons, drains,
quarantines, ``master.services.nodes``), the queue wrapper over a real policy deciding over what
the registry lets it see, the reason-code refinement (``reasoncodes.classify``), the drain rule
(``horus_core.service``) and the action checks. Whatever the order of submissions, finishes,
cordons, drains, uncordons, GPU faults and passes:

- no queue holds more than its quota plus its borrowing limit;
- no placement on a cordoned or draining node or a quarantined GPU;
- no job is preempted by the scheduler within its minimum run time (a drain past its deadline
  is the admin's order and may preempt earlier);
- every pending job gets one answer with a code from the vocabulary, and every submitted job is
  accounted for (running, pending or finished, exactly once).
"""

from __future__ import annotations

import dataclasses
import tomllib

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from horus_core import reasoncodes as rc
from horus_core import service as rules
from horus_core.model import Assign, ClusterSnapshot, Job, JobSpec, JobState, NodeState, Preempt, Wait
from horus_core.packing.cluster import gpu_type
from horus_core.policies import make_policy
from horus_core.policies.checks import check_actions
from horus_core.queues import QueuedPolicy, parse_config
from horus_core.queues.ledger import Ledger
from horus_core.testing import gpu
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.session import Session

CONFIG = parse_config(
    tomllib.loads(
        """
[classes.low]
level = 0
[classes.normal]
level = 100
default = true
[classes.high]
level = 1000
preempt = true
[queues.a]
nominal = { v100 = 2 }
borrowing_limit = 2
users = ["a0", "a1"]
[queues.b]
nominal = { "*" = 2 }
borrowing_limit = 1
users = ["b0"]
[queues.c]
nominal = {}
borrowing_limit = 2
"""
    )
)
USERS = ("a0", "a1", "b0", "c0")
NODES = ("n0", "n1", "n2")
PER_NODE = 2
MIN_RUN_S = 5.0
DRAINED = "is drained"  # in the reason of a drain's Preempt (horus_core.service)


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.registry = NodeRegistry()
        for name in NODES:
            gpus = tuple(gpu(name, i) for i in range(PER_NODE))
            self.registry.put(NodeEntry(name, gpus, NodeState.READY, 0.0, session=Session(name)))
        self.types = {g.uuid: gpu_type(g) for e in self.registry.all() for g in e.gpus}
        self.jobs: dict[str, Job] = {}
        self.done: set[str] = set()
        self.submitted = 0
        self.now = 0.0
        self.ran_for: list[tuple[str, float]] = []  # (job, how long it had run) per scheduler preemption
        self.policy = QueuedPolicy(make_policy("fifo"), CONFIG, min_run_s=MIN_RUN_S)
        self.exclusive = True

    @initialize(inner=st.sampled_from(["fifo", "binpack"]))
    def choose_policy(self, inner: str) -> None:
        self.policy = QueuedPolicy(make_policy(inner), CONFIG, min_run_s=MIN_RUN_S)
        self.exclusive = inner == "fifo"

    # ------------------------------------------------------------------------------ workload

    @rule(
        user=st.sampled_from(USERS),
        gpus=st.integers(1, 2),
        cls=st.sampled_from(["", "low", "high"]),
        count=st.integers(1, 3),
    )
    def submit(self, user: str, gpus: int, cls: str, count: int) -> None:
        """``count`` alike jobs at once (a team's burst: what makes queues borrow and reclaim)."""
        for _ in range(count):
            self.submitted += 1
            jid = f"j{self.submitted}"
            spec = JobSpec(("train",), gpus=gpus, owner=user, priority_class=cls, exclusive=self.exclusive)
            self.jobs[jid] = Job(jid, spec, JobState.PENDING, submitted_at=self.now)

    @precondition(lambda self: any(j.state.active for j in self.jobs.values()))
    @rule(pick=st.integers(0, 1000))
    def finish(self, pick: int) -> None:
        active = sorted(j for j, job in self.jobs.items() if job.state.active)
        jid = active[pick % len(active)]
        del self.jobs[jid]
        self.done.add(jid)

    # --------------------------------------------------------------------- nodes out of service

    @rule(
        node=st.sampled_from(NODES), drain=st.booleans(), timeout=st.none() | st.sampled_from([0.0, 2.0, 8.0])
    )
    def cordon(self, node: str, drain: bool, timeout: float | None) -> None:
        mode = NodeState.DRAINING if drain else NodeState.CORDONED
        deadline = rules.drain_deadline(self.now, timeout) if drain else None
        self.registry.book.modes[node] = (mode, deadline)
        self.registry.apply_service(node)

    @rule(node=st.sampled_from(NODES), index=st.integers(0, PER_NODE - 1), xid=st.sampled_from([13, 48, 79]))
    def gpu_fault(self, node: str, index: int, xid: int) -> None:
        why = rules.gpu_fault(0, (xid,), 0)
        if why:
            self.registry.book.quarantined[gpu(node, index).uuid] = (node, why)
            self.registry.apply_service(node)

    @rule(node=st.sampled_from(NODES))
    def uncordon(self, node: str) -> None:
        book = self.registry.book
        book.modes.pop(node, None)
        book.quarantined = {u: v for u, v in book.quarantined.items() if v[0] != node}
        self.registry.apply_service(node)

    # ---------------------------------------------------------------------------------- passes

    @rule(dt=st.sampled_from([0.5, 1.0, 2.0, 10.0]))
    def schedule(self, dt: float) -> None:
        """One pass as the master's scheduler makes it, then ``dt`` seconds pass."""
        nodes = self.registry.schedulable()
        snapshot = ClusterSnapshot(nodes, tuple(self.jobs.values()))
        actions = list(self.policy.decide(snapshot, self.now)) if nodes else []
        if nodes:
            self._check_answers(actions)
        withheld = rc.out_of_service([e.model() for e in self.registry.all()], self.jobs.values())
        actions = rc.classify(actions, self.jobs.values(), withheld)
        book = self.registry.book
        actions += rules.drain_preempts(book.deadlines(), self.jobs.values(), self.now)
        plan = check_actions(snapshot, actions)
        self._apply(plan.assigns, plan.preempts)
        overdue = {n for n, d in book.deadlines().items() if d <= self.now}
        assert not [j for j in self.jobs.values() if j.state.active and j.node in overdue]
        self.now += dt

    def _check_answers(self, actions: list[Assign | Preempt | Wait]) -> None:
        """Each pending job gets one answer; no Assign goes where the service book forbids."""
        book = self.registry.book
        pending = sorted(j.id for j in self.jobs.values() if not j.state.active)
        answered = sorted(a.job_id for a in actions if isinstance(a, Assign | Wait))
        assert answered == pending, "each pending job gets exactly one answer"
        for a in actions:
            if isinstance(a, Assign):
                assert a.node not in book.modes, (a, book.modes)
                assert not set(a.gpus) & set(book.quarantined), (a, book.quarantined)
            elif isinstance(a, Wait):
                assert a.code in rc.CODES, a

    def _apply(self, assigns: list[Assign], preempts: list[Preempt]) -> None:
        for p in preempts:
            job = self.jobs[p.job_id]
            if DRAINED not in p.reason:
                self.ran_for.append((job.id, self.now - (job.started_at or 0.0)))
            self.jobs[p.job_id] = dataclasses.replace(
                job, state=JobState.PENDING, node="", gpus=(), reason_code=rc.PREEMPTED
            )
        for a in assigns:
            job = self.jobs[a.job_id]
            self.jobs[a.job_id] = dataclasses.replace(
                job,
                state=JobState.RUNNING,
                node=a.node,
                gpus=a.gpus,
                attempt=job.attempt + 1,
                started_at=self.now,
            )

    # ------------------------------------------------------------------------------ invariants

    @invariant()
    def within_quota_and_borrowing(self) -> None:
        running = [j for j in self.jobs.values() if j.state.active]
        ledger = Ledger.of(CONFIG, running, self.types)
        for name, queue in CONFIG.queues.items():
            assert ledger.borrowed(name) <= queue.borrowing_limit, (name, ledger.used(name))

    @invariant()
    def no_preemption_within_min_run(self) -> None:
        assert all(ran >= MIN_RUN_S for _, ran in self.ran_for), self.ran_for

    @invariant()
    def every_job_accounted_for(self) -> None:
        assert len(self.jobs) + len(self.done) == self.submitted
        assert not set(self.jobs) & self.done

    @invariant()
    def quarantined_gpus_hidden_from_policies(self) -> None:
        seen = {g.uuid for n in self.registry.schedulable() for g in n.gpus if g.healthy}
        assert not seen & set(self.registry.book.quarantined)


SchedulerMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
test_scheduler_with_queues_and_cordons = SchedulerMachine.TestCase
