"""The simulator hands each round's snapshot the jobs changed since the last round's, as the
master's live index does (``horus_core.model.JobChanges``): exactly the jobs whose view changed,
and a policy that follows them decides as one that looks at every job."""

from __future__ import annotations

from horus_core.interference import default_model
from horus_core.model import Action, ClusterSnapshot
from horus_core.policies import make_policy
from horus_core.policies.base import Policy
from horus_core.sim import SimConfig, Simulator, build_cluster, generate_synthetic, parse_synthetic

TRACE = "synthetic:jobs=30,rate=30,seed=4"


class Seen:
    """A policy that keeps every snapshot it is given and, with ``strip``, hands the inner
    policy the same snapshot without its changes (it must then look at every job)."""

    def __init__(self, inner: Policy, strip: bool) -> None:
        self.inner, self.name, self.strip = inner, inner.name, strip
        self.snapshots: list[ClusterSnapshot] = []

    def decide(self, snapshot: ClusterSnapshot, now: float) -> list[Action]:
        self.snapshots.append(snapshot)
        return self.inner.decide(
            ClusterSnapshot(snapshot.nodes, snapshot.jobs) if self.strip else snapshot, now
        )


def run(name: str, strip: bool) -> tuple[Seen, object]:
    trace = generate_synthetic(parse_synthetic(TRACE), default_model().solo_throughput)
    policy = Seen(make_policy(name, default_model()), strip)
    result = Simulator(
        trace, build_cluster("v100:4"), policy, default_model(), SimConfig(timeline=False)
    ).run()
    return policy, result.records


def test_each_snapshot_carries_exactly_the_jobs_changed_since_the_last() -> None:
    policy, _ = run("horus", strip=False)
    before: dict[str, object] = {}
    epochs = []
    for snap in policy.snapshots:
        changes = snap.changes
        assert changes is not None
        epochs.append((changes.base, changes.epoch))
        now = {j.id: j for j in snap.jobs}
        moved = {i for i in now.keys() | before.keys() if now.get(i) is not before.get(i)}
        assert set(changes.jobs) == moved
        assert all(changes.jobs[i] is now.get(i) for i in moved)
        before = dict(now)
    assert [b for b, _ in epochs[1:]] == [e for _, e in epochs[:-1]]  # (each follows the last)
    assert len({c.source for s in policy.snapshots if (c := s.changes) is not None}) == 1
    other, _ = run("horus", strip=False)
    assert other.snapshots[0].changes is not None and policy.snapshots[0].changes is not None
    assert other.snapshots[0].changes.source != policy.snapshots[0].changes.source  # (a run of its own)


def test_policies_following_the_changes_decide_as_policies_looking_at_every_job() -> None:
    started = 0
    for name in ("horus", "fifo", "lucid", "gandiva"):
        _, records = run(name, strip=False)
        _, walked = run(name, strip=True)
        assert records == walked, name
        started += sum(1 for r in records if r.gpus > 1 and r.first_start is not None)
    assert started > 0  # (gangs ran: the reservation's ledgers had work)
