"""The watchdog's rule: which attempts are above their GPU memory cap plus slack."""

from __future__ import annotations

from worker.gpu.base import ProcessReading
from worker.sharing.watchdog import MemoryCap, Peaks, breaches, usage

A = MemoryCap("a", 1, (100,), 4096)
B = MemoryCap("b", 2, (200, 201), 8192)


def test_only_attempts_above_cap_plus_slack_breach() -> None:
    readings = [
        ProcessReading(100, "GPU-0", 4096 + 256),  # at cap + slack: allowed
        ProcessReading(200, "GPU-0", 8192 + 257),  # one MiB beyond: stopped
        ProcessReading(300, "GPU-0", 99_999),  # no cap names it: not ours to judge
    ]
    found = breaches([A, B], readings, slack_mib=256)
    assert [(b.cap.job_id, b.used_mib) for b in found] == [("b", 8192 + 257)]


def test_a_breach_on_two_gpus_is_reported_once_with_the_largest_use() -> None:
    readings = [ProcessReading(200, "GPU-0", 9000), ProcessReading(201, "GPU-1", 12000)]
    found = breaches([B], readings, slack_mib=0)
    assert len(found) == 1 and found[0].gpu_uuid == "GPU-1" and found[0].used_mib == 12000


def test_an_attempts_processes_on_one_gpu_count_together() -> None:
    readings = [ProcessReading(200, "GPU-0", 5000), ProcessReading(201, "GPU-0", 3500)]  # 8500 > 8192+256
    found = breaches([B], readings, slack_mib=256)
    assert [(b.cap.job_id, b.gpu_uuid, b.used_mib) for b in found] == [("b", "GPU-0", 8500)]
    assert usage([B], readings) == {("b", 2): {"GPU-0": 8500}}


def test_no_cap_means_measured_only_and_peaks_keep_the_largest_gpu() -> None:
    free = MemoryCap("c", 1, (300,), 0)
    readings = [ProcessReading(300, "GPU-0", 50_000), ProcessReading(300, "GPU-1", 70_000)]
    assert breaches([free], readings) == []
    peaks = Peaks()
    peaks.observe(usage([free], readings))
    peaks.observe(usage([free], [ProcessReading(300, "GPU-0", 1)]))
    assert peaks.of(("c", 1)) == 70_000 and peaks.pop(("c", 1)) == 70_000 and peaks.of(("c", 1)) == 0
