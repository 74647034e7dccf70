"""A hypothesis state machine over the queue wrapper: random submissions, finishes and passes.

Invariants after every pass: no queue holds more than its quota plus its borrowing limit, no
attempt is preempted before it has run the minimum run time, and every submitted job is
accounted for (running, pending with an answer, or finished). Further invariants (cordoned
nodes, quarantined GPUs) are one more ``@invariant`` and one more ``@rule`` each.
"""

from __future__ import annotations

import tomllib

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from queue_harness import Cluster, job

from horus_core.model import Assign, Wait
from horus_core.packing.cluster import gpu_type
from horus_core.policies import make_policy
from horus_core.queues import QueuedPolicy, parse_config
from horus_core.queues.ledger import Ledger
from horus_core.testing import nodes

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
nominal = { v100 = 3 }
borrowing_limit = 2
users = ["a0", "a1"]
[queues.b]
nominal = { "*" = 2 }
borrowing_limit = 1
users = ["b0"]
[queues.c]
nominal = {}
borrowing_limit = 3
"""
    )
)
USERS = {"a0": "a", "a1": "a", "b0": "b", "c0": "c"}
MIN_RUN_S = 5.0


class QueueMachine(RuleBasedStateMachine):
    cluster: Cluster

    @initialize(inner=st.sampled_from(["fifo", "binpack"]), per=st.integers(1, 4))
    def start(self, inner: str, per: int) -> None:
        policy = QueuedPolicy(make_policy(inner), CONFIG, min_run_s=MIN_RUN_S)
        self.cluster = Cluster(nodes(2, per), policy)
        self.exclusive = inner == "fifo"
        self.submitted: set[str] = set()

    @rule(
        user=st.sampled_from(sorted(USERS)),
        gpus=st.integers(1, 2),
        cls=st.sampled_from(["", "low", "high"]),
    )
    def submit(self, user: str, gpus: int, cls: str) -> None:
        jid = f"j{len(self.submitted)}"
        self.cluster.submit(job(jid, user, gpus, cls=cls, exclusive=self.exclusive))
        self.submitted.add(jid)

    @precondition(lambda self: bool(self.cluster.running()))
    @rule(pick=st.integers(0, 1000))
    def finish(self, pick: int) -> None:
        running = sorted(j.id for j in self.cluster.running())
        self.cluster.finish(running[pick % len(running)])

    @rule(dt=st.sampled_from([0.5, 1.0, 3.0, 10.0]))
    def schedule(self, dt: float) -> None:
        c = self.cluster
        pending = {j.id for j in c.jobs.values() if not j.state.active}
        actions = c.step(dt)
        answered = [a.job_id for a in actions if isinstance(a, Assign | Wait)]
        assert sorted(answered) == sorted(pending), "each pending job gets exactly one answer"

    @invariant()
    def within_quota_and_borrowing(self) -> None:
        types = {g.uuid: gpu_type(g) for n in self.cluster.nodes for g in n.gpus}
        ledger = Ledger.of(CONFIG, self.cluster.running(), types)
        for name, queue in CONFIG.queues.items():
            assert ledger.borrowed(name) <= queue.borrowing_limit, (name, ledger.used)

    @invariant()
    def no_preemption_within_min_run(self) -> None:
        assert all(ran >= MIN_RUN_S for ran in self.cluster.ran_for), self.cluster.ran_for

    @invariant()
    def every_job_accounted_for(self) -> None:
        c = self.cluster
        assert set(c.jobs) | c.done == self.submitted
        assert not set(c.jobs) & c.done


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
