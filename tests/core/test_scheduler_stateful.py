"""One hypothesis state machine of the master's whole scheduling pass: queues, quotas, priority
classes and nodes out of service (issue 13), over every configuration a pass can run in.

The pieces are the ones the master runs: its node registry and service book (cordons, drains,
quarantines, ``master.services.nodes``), a real policy (fifo, binpack, horus, horus-util or
lucid), bare or inside the queue wrapper as ``--queues`` puts it, deciding over what the registry
lets it see, the reason-code refinement (``reasoncodes.classify``), the drain rule
(``horus_core.service``) and the action checks. Each run draws the policy, whether queues are on
(and their quotas), and the cluster's shape. Whatever the order of submissions, finishes,
cordons, drains, uncordons, GPU faults, idle time and passes:

- no queue holds more than its quota plus its borrowing limit;
- no placement on a cordoned or draining node or a quarantined GPU, and no quarantined GPU is
  shown to a policy as healthy;
- no job stays on a drained node after a pass past the drain's deadline;
- with queues, no job is preempted by the scheduler within its minimum run time (a drain past
  its deadline is the admin's order and may preempt earlier);
- every action the policy takes passes the master's checks (none is dropped);
- every pending job gets one answer with a code from the vocabulary, before and after the
  refinement, and every submitted job is accounted for (running, pending or finished, once).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from horus_core import reasoncodes as rc
from horus_core import service as rules
from horus_core.model import Action, Assign, ClusterSnapshot, Job, JobSpec, JobState, NodeState, Preempt, Wait
from horus_core.packing.cluster import gpu_type
from horus_core.policies import Policy, make_policy
from horus_core.policies.checks import check_actions
from horus_core.queues import QueueConfig, QueuedPolicy
from horus_core.queues.ledger import Ledger
from horus_core.testing import gpu, placed, queue_config, queue_table, queues_toml, requeued
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.session import Session

POLICIES = ("fifo", "binpack", "horus", "horus-util", "lucid")
USERS = ("a0", "a1", "b0", "c0")
TYPES = ("ResNet-18 (batch size 32)", "Recommendation (batch size 512)", "")
MAX_NODES, MAX_PER_NODE = 3, 4
MIN_RUN_S = 5.0
K80: dict[str, Any] = {"model": "Tesla K80", "memory_mib": 11441, "gpu_type": "k80"}
DRAINED = "is drained"  # in the reason of a drain's Preempt (horus_core.service)


@st.composite
def team_queues(draw: st.DrawFn) -> QueueConfig:
    """Three teams' queues: ``a`` with a V100 quota, ``b`` with an any-type quota, ``c`` with only
    a borrowing limit; the numbers drawn."""
    limit = st.integers(0, 3)
    a = queue_table("a", {"v100": draw(st.integers(1, 3))}, borrowing_limit=draw(limit), users=("a0", "a1"))
    b = queue_table("b", {"*": draw(st.integers(1, 2))}, borrowing_limit=draw(limit), users=("b0",))
    c = queue_table("c", {}, borrowing_limit=draw(st.integers(1, 3)))
    return queue_config(queues_toml(a, b, c))


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.registry = NodeRegistry()
        self.names: list[str] = []
        self.per = 1
        self.types: dict[str, str] = {}
        self.jobs: dict[str, Job] = {}
        self.done: set[str] = set()
        self.submitted = 0
        self.now = 0.0
        self.ran_for: list[tuple[str, float]] = []  # (job, how long it had run) per scheduler preemption
        self.config: QueueConfig | None = None
        self.policy: Policy = make_policy("fifo")

    @initialize(
        name=st.sampled_from(POLICIES),
        config=st.one_of(st.none(), team_queues(), team_queues()),  # queues on 2 times in 3
        n_nodes=st.integers(2, MAX_NODES),
        per=st.integers(1, MAX_PER_NODE),
        k80=st.booleans(),
    )
    def start(self, name: str, config: QueueConfig | None, n_nodes: int, per: int, k80: bool) -> None:
        """The policy (bare, or in the queue wrapper when ``config`` is drawn) and the cluster
        (its last node of K80s when ``k80`` is drawn: a mixed-type cluster)."""
        self.config, self.per = config, per
        inner = make_policy(name)
        self.policy = inner if config is None else QueuedPolicy(inner, config, min_run_s=MIN_RUN_S)
        self.names = [f"n{i}" for i in range(n_nodes)]
        for node in self.names:
            kind = K80 if k80 and node == self.names[-1] else {}
            gpus = tuple(replace(gpu(node, i), **kind) for i in range(per))
            self.registry.put(NodeEntry(node, gpus, NodeState.READY, 0.0, session=Session(node)))
        self.types = {g.uuid: gpu_type(g) for e in self.registry.all() for g in e.gpus}

    # ------------------------------------------------------------------------------ workload

    @rule(
        user=st.sampled_from(USERS),
        gpus=st.integers(1, 3),
        cls=st.sampled_from(["", "low", "high"]),
        count=st.integers(1, 3),
        exclusive=st.booleans(),
        job_type=st.sampled_from(TYPES),
        poke=st.booleans(),
    )
    def submit(
        self, user: str, gpus: int, cls: str, count: int, exclusive: bool, job_type: str, poke: bool
    ) -> None:
        """``count`` alike jobs at once (a team's burst: what makes queues borrow and reclaim);
        ``poke``: the pass the submission wakes runs before the next event (hypothesis turns whole
        rules off in some runs, ``schedule`` too: passes still happen there)."""
        spec = JobSpec(
            ("train",), gpus=gpus, owner=user, priority_class=cls, exclusive=exclusive, job_type=job_type
        )
        for _ in range(count):
            self.submitted += 1
            jid = f"j{self.submitted}"
            self.jobs[jid] = Job(jid, spec, JobState.PENDING, submitted_at=self.now)
        if poke:
            self._pass()

    @precondition(lambda self: any(j.state.active for j in self.jobs.values()))
    @rule(pick=st.integers(0, 1000), poke=st.booleans())
    def finish(self, pick: int, poke: bool) -> None:
        active = sorted(j for j, job in self.jobs.items() if job.state.active)
        jid = active[pick % len(active)]
        del self.jobs[jid]
        self.done.add(jid)
        if poke:
            self._pass()

    @rule(seconds=st.floats(0, 20))
    def wait(self, seconds: float) -> None:
        """Time passes with no pass (a drain's deadline may go by unseen)."""
        self.now += seconds

    # --------------------------------------------------------------------- nodes out of service

    @rule(
        node=st.integers(0, MAX_NODES - 1),
        drain=st.booleans(),
        timeout=st.none() | st.sampled_from([0.0, 2.0, 8.0]) | st.floats(0, 30),
    )
    def cordon(self, node: int, drain: bool, timeout: float | None) -> None:
        name = self._node(node)
        mode = NodeState.DRAINING if drain else NodeState.CORDONED
        deadline = rules.drain_deadline(self.now, timeout) if drain else None
        self.registry.book.modes[name] = (mode, deadline)
        self.registry.apply_service(name)

    @rule(
        node=st.integers(0, MAX_NODES - 1),
        index=st.integers(0, MAX_PER_NODE - 1),
        xid=st.sampled_from([13, 48, 79]),
    )
    def gpu_fault(self, node: int, index: int, xid: int) -> None:
        name = self._node(node)
        why = rules.gpu_fault(0, (xid,), 0)
        if why:
            self.registry.book.quarantined[gpu(name, index % self.per).uuid] = (name, why)
            self.registry.apply_service(name)

    @rule(node=st.integers(0, MAX_NODES - 1))
    def uncordon(self, node: int) -> None:
        name = self._node(node)
        book = self.registry.book
        book.modes.pop(name, None)
        book.quarantined = {u: v for u, v in book.quarantined.items() if v[0] != name}
        self.registry.apply_service(name)

    def _node(self, drawn: int) -> str:
        """The node a rule names (drawn before the cluster's size is known)."""
        return self.names[drawn % len(self.names)]

    # ---------------------------------------------------------------------------------- passes

    @rule(dt=st.sampled_from([0.5, 1.0, 2.0, 3.0, 10.0]), passes=st.integers(1, 3))
    def schedule(self, dt: float, passes: int) -> None:
        """``passes`` passes, ``dt`` seconds apart (jobs run long enough to be preempted)."""
        for _ in range(passes):
            self._pass()
            self.now += dt

    def _pass(self) -> None:
        """One pass as the master's scheduler makes it."""
        nodes = self.registry.schedulable()
        snapshot = ClusterSnapshot(nodes, tuple(self.jobs.values()))
        actions = list(self.policy.decide(snapshot, self.now)) if nodes else []
        if nodes:
            self._check_answers(actions)
        withheld = rc.out_of_service([e.model() for e in self.registry.all()], self.jobs.values())
        actions = rc.classify(actions, self.jobs.values(), withheld)
        assert all(a.code in rc.CODES for a in actions if isinstance(a, Wait)), actions
        book = self.registry.book
        drains = rules.drain_preempts(book.deadlines(), self.jobs.values(), self.now)
        plan = check_actions(snapshot, [*actions, *drains])
        # Only a drain's preempt of a job the policy preempts too may be dropped (a second action).
        assert all(a in drains for a, _ in plan.dropped), plan.dropped
        self._apply(plan.assigns, plan.preempts)
        overdue = {n for n, d in book.deadlines().items() if d <= self.now}
        assert not [j for j in self.jobs.values() if j.state.active and j.node in overdue]

    def _check_answers(self, actions: list[Action]) -> None:
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
            self.jobs[p.job_id] = requeued(job, rc.PREEMPTED)
        for a in assigns:
            self.jobs[a.job_id] = placed(self.jobs[a.job_id], a, self.now)

    # ------------------------------------------------------------------------------ invariants

    @invariant()
    def within_quota_and_borrowing(self) -> None:
        if self.config is None:
            return
        running = [j for j in self.jobs.values() if j.state.active]
        ledger = Ledger.of(self.config, running, self.types)
        for name, queue in self.config.queues.items():
            assert ledger.borrowed(name) <= queue.borrowing_limit, (name, ledger.used(name))

    @invariant()
    def no_preemption_within_min_run(self) -> None:
        if self.config is not None:  # bare policies preempt as they see fit
            assert all(ran >= MIN_RUN_S for _, ran in self.ran_for), self.ran_for

    @invariant()
    def every_job_accounted_for(self) -> None:
        assert len(self.jobs) + len(self.done) == self.submitted
        assert not set(self.jobs) & self.done

    @invariant()
    def quarantined_gpus_hidden_from_policies(self) -> None:
        seen = {g.uuid for n in self.registry.schedulable() for g in n.gpus if g.healthy}
        assert not seen & set(self.registry.book.quarantined)


SchedulerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_scheduler_with_queues_and_cordons = SchedulerMachine.TestCase
