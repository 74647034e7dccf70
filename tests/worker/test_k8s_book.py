"""The node agent's decisions (worker/k8s/book.py), alone: over-cap evictions (once, asked again
only when refused), OOM containment's evict-or-not, sharing and witnesses, and the readings that
go into the report."""

from __future__ import annotations

from horus_core.k8sreport import EVENT_OOM, EVENT_OVER_CAP, NodeReport, parse_report, render_report
from worker.gpu.base import GpuInfo, GpuReading, ProcessReading
from worker.k8s.book import RETRY_S, Announce, Evict, NodeBook, Progress
from worker.k8s.pods import Cap, NodePod, Termination

G0, G1 = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"
GPUS = [GpuInfo(G0, 0, "Tesla V100-SXM2-16GB", 16384), GpuInfo(G1, 1, "Tesla V100-SXM2-16GB", 16384)]
A, B, C = "uid-a", "uid-b", "uid-c"
OOM_RUN = Termination("main", 0, 1, "torch.OutOfMemoryError: CUDA out of memory")


def _book() -> NodeBook:
    book = NodeBook(GPUS, slack_mib=256)
    for uid, cap in ((A, Cap(4096, source="horus.io/gpu-memory")), (B, Cap(fraction=0.25)), (C, Cap())):
        book.pod_seen(NodePod(uid, "team", uid.removeprefix("uid-"), phase="Running", cap=cap))
    return book


OWNER = {100: A, 200: B, 201: B, 300: C}


def _reading(a_mib: int, *, b_gpu: str = G0) -> list[ProcessReading]:
    return [
        ProcessReading(100, G0, a_mib, 40.0),
        ProcessReading(200, b_gpu, 3000, 20.0),
        ProcessReading(201, b_gpu, 500, 5.0),
        ProcessReading(300, G1, 9000, 80.0),
        ProcessReading(999, G1, 700, 3.0),  # no pod of this node
    ]


def test_a_pod_over_its_cap_is_evicted_once_and_its_neighbour_witnessed() -> None:
    book = _book()
    assert book.memory(_reading(4096 + 256), OWNER, 10.0) == [], "within the slack"
    effects = book.memory(_reading(5000), OWNER, 11.0)
    assert [type(e) for e in effects] == [Evict, Announce] and effects[0].pod.uid == A
    assert "used 5000 MiB of GPU memory on " + G0 in effects[0].message and "cap 4 GiB" in effects[0].message
    (event,) = book.events
    assert (event.uid, event.kind, event.gpu, event.mem_used_mib, event.cap_mib) == (
        A,
        EVENT_OVER_CAP,
        G0,
        5000,
        4096,
    )
    assert event.shared and not event.neighbour_over_cap
    assert book.witnessed == {B} and book.shared == {A, B}
    book.evicted(A, True, 11.1)
    assert book.memory(_reading(6000), OWNER, 11.0 + 10 * RETRY_S) == [], "evicted: not asked again"
    assert book.peaks[A] == 6000 and book.peaks[B] == 3500 and book.peaks[C] == 9000


def test_a_refused_eviction_is_asked_again_after_the_retry_time_until_the_pod_is_deleting() -> None:
    book = _book()
    book.memory(_reading(5000), OWNER, 0.0)
    book.evicted(A, False, 0.5)  # e.g. 429: a PodDisruptionBudget
    assert book.memory(_reading(5000), OWNER, 0.5 + RETRY_S - 0.1) == []
    (retry,) = book.memory(_reading(5000), OWNER, 0.5 + RETRY_S)
    assert isinstance(retry, Evict) and retry.pod.uid == A and len(book.events) == 1
    book.pod_seen(NodePod(A, "team", "a", phase="Running", deleting=True, cap=Cap(4096)))
    assert book.memory(_reading(9000), OWNER, 100.0) == [], "deleting: its memory is going"


def test_a_fractional_cap_and_no_cap() -> None:
    book = _book()
    over_b = [ProcessReading(200, G1, 4096 + 257, 1.0), ProcessReading(300, G1, 16000, 1.0)]
    effects = book.memory(over_b, OWNER, 1.0)
    assert [e.pod.uid for e in effects if isinstance(e, Evict)] == [B], "C has no cap: measured only"
    assert book.events[0].cap_mib == 4096


def test_oom_of_a_grower_is_evicted_of_a_victim_or_a_lone_pod_only_reported() -> None:
    book = _book()
    book.memory(_reading(5000), OWNER, 1.0)  # A over its cap; B witnessed it
    assert book.pod_seen(
        NodePod(B, "team", "b", phase="Running", cap=Cap(fraction=0.25), ended=(OOM_RUN,))
    ) == [OOM_RUN]
    victim = book.ended(B, OOM_RUN, True, 2.0)
    assert [type(e) for e in victim] == [Announce], "a neighbour grew: it restarts in place"
    assert (book.events[-1].kind, book.events[-1].shared, book.events[-1].neighbour_over_cap) == (
        EVENT_OOM,
        True,
        True,
    )
    assert book.pod_seen(NodePod(B, "team", "b", phase="Running", ended=(OOM_RUN,))) == [], "judged once"

    fresh = _book()
    fresh.memory(_reading(3000), OWNER, 1.0)  # A and B share G0, nobody over
    grower = fresh.ended(A, OOM_RUN, True, 2.0)
    assert [type(e) for e in grower] == [Announce, Evict], "it runs again alone: not in place"
    assert "it shared a GPU" in grower[0].message and fresh.events[-1].mem_used_mib == 3000
    alone = fresh.ended(C, OOM_RUN, True, 3.0)
    assert [type(e) for e in alone] == [Announce] and not fresh.events[-1].shared
    assert fresh.ended(A, Termination("main", 1, 2, ""), False, 4.0) == [], "not an OOM"


def test_a_finished_grower_is_not_evicted() -> None:
    book = _book()
    book.memory(_reading(3000), OWNER, 1.0)
    book.pod_seen(NodePod(A, "team", "a", phase="Failed", cap=Cap(4096), ended=(OOM_RUN,)))
    assert [type(e) for e in book.ended(A, OOM_RUN, True, 2.0)] == [Announce]


def test_sharing_from_the_gpus_the_scheduler_gave() -> None:
    book = NodeBook(GPUS)
    book.pod_seen(NodePod(A, "t", "a", gpus=("0",)))
    book.pod_seen(NodePod(B, "t", "b", gpus=(G0,)))
    book.pod_seen(NodePod(C, "t", "c", gpus=("1",)))
    book.memory([], {}, 0.0)
    assert book.shared == {A, B}


def test_static_pods_are_found_by_their_config_hash_and_gone_pods_forgotten() -> None:
    book = _book()
    book.pod_seen(NodePod("mirror-uid", "kube-system", "s", config_hash="6e1a3b5c7d9f0a2b4c6d8e0f1a3b5c7d"))
    assert book.uid_of("6e1a3b5c7d9f0a2b4c6d8e0f1a3b5c7d") == "mirror-uid"
    assert book.uid_of(A) == A and book.uid_of("elsewhere") is None
    book.memory(_reading(5000), OWNER, 0.0)
    book.pod_gone(A)
    book.pod_gone("mirror-uid")
    assert A not in book.pods and A not in book.peaks and A not in book.shared
    assert book.uid_of("6e1a3b5c7d9f0a2b4c6d8e0f1a3b5c7d") is None


def test_the_readings_make_a_valid_report() -> None:
    book = _book()
    book.memory(_reading(5000), OWNER, 0.0)
    gpus = [GpuReading(G0, 61.0, 30.0, 9000, 16384), GpuReading(G1, 150.0, 0.0, 9700, 16384)]
    multi = [*_reading(5000, b_gpu=G1), ProcessReading(100, G1, 1000, 10.0)]
    got_gpus, pods = book.readings(
        gpus, multi, OWNER, {B: Progress(120, 88.5), "uid-unknown": Progress(1, 1.0)}
    )
    assert [(g.uuid, g.index, g.util) for g in got_gpus] == [(G0, 0, 61.0), (G1, 1, 100.0)]
    by_uid = {p.uid: p for p in pods}
    assert set(by_uid) == {A, B, C}
    assert (by_uid[A].gpus, by_uid[A].util, by_uid[A].mem_used_mib) == ((G0, G1), 25.0, 5000)
    assert (by_uid[B].gpus, by_uid[B].mem_used_mib, by_uid[B].step, by_uid[B].samples_per_s) == (
        (G1,),
        3500,
        120,
        88.5,
    )
    assert by_uid[C].samples_per_s is None and by_uid[C].util == 80.0
    text = render_report(NodeReport("n1", 1000.0, 15.0, got_gpus, pods, tuple(book.events)))
    assert parse_report(text).events[0].uid == A
