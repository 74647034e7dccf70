"""A hypothesis state machine of scheduling with nodes out of service: the master's registry and
service book (cordons, drains, quarantines), real policies deciding over what the registry lets
them see, and the drain rule. Whatever the order of events: no placement on a cordoned or
draining node or a quarantined GPU, no job left on a drained node after a pass past its deadline, every
pending job's code is in the vocabulary, and every submitted job is accounted for."""

from __future__ import annotations

import dataclasses

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from horus_core import reasoncodes as rc
from horus_core import service as rules
from horus_core.model import Assign, ClusterSnapshot, Job, JobSpec, JobState, NodeState, Preempt, Wait
from horus_core.policies import Policy, make_policy
from horus_core.policies.checks import check_actions
from horus_core.testing import gpu
from master.services.nodes import NodeEntry, NodeRegistry
from master.services.session import Session

NODES = ("n0", "n1", "n2")
PER_NODE = 2
TYPES = ("ResNet-18 (batch size 32)", "Recommendation (batch size 512)", "")


class NodesOutOfService(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.registry = NodeRegistry()
        for name in NODES:
            gpus = tuple(gpu(name, i) for i in range(PER_NODE))
            self.registry.put(NodeEntry(name, gpus, NodeState.READY, 0.0, session=Session(name)))
        self.jobs: dict[str, Job] = {}
        self.done: set[str] = set()
        self.submitted = 0
        self.now = 0.0
        self.policy: Policy = make_policy("fifo")

    @initialize(name=st.sampled_from(["fifo", "binpack", "horus", "horus-util", "lucid"]))
    def choose_policy(self, name: str) -> None:
        self.policy = make_policy(name)

    @rule(gpus=st.integers(1, 3), exclusive=st.booleans(), job_type=st.sampled_from(TYPES))
    def submit(self, gpus: int, exclusive: bool, job_type: str) -> None:
        self.submitted += 1
        jid = f"j{self.submitted}"
        spec = JobSpec(command=("x",), gpus=gpus, exclusive=exclusive, job_type=job_type)
        self.jobs[jid] = Job(jid, spec, JobState.PENDING, submitted_at=self.now)

    @rule(node=st.sampled_from(NODES), drain=st.booleans(), timeout=st.none() | st.floats(0, 30))
    def cordon(self, node: str, drain: bool, timeout: float | None) -> None:
        mode = NodeState.DRAINING if drain else NodeState.CORDONED
        deadline = rules.drain_deadline(self.now, timeout) if drain else None
        self.registry.book.modes[node] = (mode, deadline)
        self.registry.apply_service(node)

    @rule(node=st.sampled_from(NODES), index=st.integers(0, PER_NODE - 1), xid=st.sampled_from([13, 48, 79]))
    def xid(self, node: str, index: int, xid: int) -> None:
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

    @rule(seconds=st.floats(0, 20))
    def wait(self, seconds: float) -> None:
        self.now += seconds

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        active = sorted(j for j, job in self.jobs.items() if job.state.active)
        if active:
            jid = data.draw(st.sampled_from(active))
            del self.jobs[jid]
            self.done.add(jid)

    @rule()
    def schedule(self) -> None:
        nodes = self.registry.schedulable()
        snapshot = ClusterSnapshot(nodes, tuple(self.jobs.values()))
        actions = self.policy.decide(snapshot, self.now) if nodes else []
        book = self.registry.book
        for a in actions:  # the policy's own choices, before the master's checks drop anything
            if isinstance(a, Assign):
                assert a.node not in book.modes, (a, book.modes)
                assert not set(a.gpus) & set(book.quarantined), (a, book.quarantined)
            if isinstance(a, Wait):
                assert a.code in rc.CODES, a
        withheld = rc.out_of_service([e.model() for e in self.registry.all()], self.jobs.values())
        for a in actions:
            if isinstance(a, Wait):
                assert rc.refine(a, self.jobs[a.job_id].spec.gpus, withheld) in rc.CODES
        actions += rules.drain_preempts(book.deadlines(), self.jobs.values(), self.now)
        plan = check_actions(snapshot, actions)
        self._apply(plan.assigns, plan.preempts)
        overdue = {n for n, d in book.deadlines().items() if d <= self.now}
        assert not [j for j in self.jobs.values() if j.state.active and j.node in overdue]

    def _apply(self, assigns: list[Assign], preempts: list[Preempt]) -> None:
        for p in preempts:
            job = self.jobs[p.job_id]
            self.jobs[p.job_id] = dataclasses.replace(job, state=JobState.PENDING, reason_code=rc.PREEMPTED)
        for a in assigns:
            job = self.jobs[a.job_id]
            self.jobs[a.job_id] = dataclasses.replace(
                job, state=JobState.RUNNING, node=a.node, gpus=a.gpus, attempt=job.attempt + 1
            )

    @invariant()
    def every_job_accounted_for(self) -> None:
        assert len(self.jobs) + len(self.done) == self.submitted
        assert not set(self.jobs) & self.done

    @invariant()
    def quarantined_gpus_hidden_from_policies(self) -> None:
        seen = {g.uuid for n in self.registry.schedulable() for g in n.gpus if g.healthy}
        assert not seen & set(self.registry.book.quarantined)


NodesOutOfService.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_nodes_out_of_service = NodesOutOfService.TestCase
