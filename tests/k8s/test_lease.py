"""Leader election (master.k8s.lease) on a real kube-apiserver: a standby takes over within 15 s
of a SIGKILLed leader (real processes), never while the leader's term runs; racing candidates
get one winner through resourceVersion; a leader cut off from the apiserver stops leading (its
work cancelled) before the lease can expire; a clean exit hands over at once."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from horus_core.kubeapi import Kube, KubeConfig, load_kubeconfig
from master.k8s.lease import Elector, LeaseTimings
from tests.k8s.nodeplane import ADMIN_TOKEN, ROOT, ControlPlane, control_plane

NS = "default"
FAST = LeaseTimings(duration_s=3.0, renew_deadline_s=2.0, retry_s=0.5)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with control_plane(tmp_path_factory.mktemp("k8s")) as p:
        yield p


@pytest.fixture(scope="module")
def kubeconfig(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return plane.kubeconfig(tmp_path_factory.mktemp("kc") / "admin.kubeconfig", ADMIN_TOKEN)


def _ticks(out: pathlib.Path) -> list[tuple[str, float]]:
    if not out.exists():
        return []
    rows = [line.split() for line in out.read_text().splitlines()]
    return [(who, float(t)) for who, t in rows]


def _spawn(kubeconfig: pathlib.Path, name: str, who: str, out: pathlib.Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.k8s.elector", str(kubeconfig), NS, name, who, str(out)]
    return subprocess.Popen(argv, cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})


def _wait_for(out: pathlib.Path, who: str, limit_s: float) -> float:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        times = [t for w, t in _ticks(out) if w == who]
        if times:
            return times[0]
        time.sleep(0.1)
    raise AssertionError(f"{who} did not lead within {limit_s:.0f} s: {_ticks(out)[-3:]}")


def test_a_standby_takes_over_within_15_s_of_a_sigkilled_leader(
    plane: ControlPlane, kubeconfig: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    out = tmp_path / "ticks"
    a = _spawn(kubeconfig, "kill", "a", out)
    b: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(out, "a", 20)
        b = _spawn(kubeconfig, "kill", "b", out)
        time.sleep(3.0)  # b is campaigning: it must stay a standby while a renews
        assert [w for w, _ in _ticks(out)].count("b") == 0
        a.send_signal(signal.SIGKILL)
        a.wait(5)
        killed = time.time()
        first_b = _wait_for(out, "b", 15.0)
        assert first_b - killed <= 15.0
        last_a = max(t for w, t in _ticks(out) if w == "a")
        assert last_a < first_b, "two leaders at once"
        assert (
            plane.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kill")["spec"][
                "holderIdentity"
            ]
            == "b"
        )
        b.send_signal(signal.SIGTERM)  # a clean exit releases the lease
        assert b.wait(10) == 0
        spec = plane.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kill")["spec"]
        assert spec["holderIdentity"] == "" and spec["leaseTransitions"] == 1
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


async def test_racing_candidates_get_one_winner_and_a_release_hands_over(kubeconfig: pathlib.Path) -> None:
    config = load_kubeconfig(kubeconfig)
    async with Kube(config) as k1, Kube(config) as k2, Kube(config) as k3:
        electors = [Elector(k, NS, "race", f"c{i}", FAST) for i, k in enumerate((k1, k2, k3))]
        won = await asyncio.gather(*(e.try_acquire_or_renew() for e in electors))
        assert sum(won) == 1
        leader = electors[won.index(True)]
        others = [e for e in electors if e is not leader]
        assert await leader.try_acquire_or_renew()  # a renew
        assert not any(await asyncio.gather(*(e.try_acquire_or_renew() for e in others)))
        await leader.release()
        assert not leader.leading
        won = await asyncio.gather(*(e.try_acquire_or_renew() for e in others))
        assert sum(won) == 1  # at once: a released lease has no holder to wait out


async def test_a_leader_cut_off_stops_before_its_lease_expires(kubeconfig: pathlib.Path) -> None:
    config = load_kubeconfig(kubeconfig)
    dead = KubeConfig("https://127.0.0.1:9", config.ssl, config.token)  # nothing listens there
    async with Kube(config) as kube, Kube(dead) as cut:
        leader = Elector(kube, NS, "fence", "leader", FAST)
        standby = Elector(kube, NS, "fence", "standby", FAST)
        stop, began, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def work() -> None:
            began.set()
            try:
                await asyncio.Event().wait()
            finally:
                ended.set()

        run = asyncio.ensure_future(leader.run(stop, work))
        await asyncio.wait_for(began.wait(), 5)
        assert not await standby.try_acquire_or_renew()
        leader.kube = cut  # from now on every renew fails
        cut_at, term_end = time.monotonic(), leader._term_ends
        await asyncio.wait_for(ended.wait(), FAST.renew_deadline_s + 1.0)
        stopped_at = time.monotonic()
        assert not leader.leading
        assert stopped_at - cut_at <= FAST.renew_deadline_s + 0.5
        taken = False
        while not taken:  # the standby waits the lease out, after the leader stopped
            taken = await standby.try_acquire_or_renew()
            if not taken:
                await asyncio.sleep(0.25)
        assert time.monotonic() >= term_end  # fencing: the old term was over first
        stop.set()
        await asyncio.wait_for(run, 5)
