"""GPU memory caps (sizes, the margin, an attempt's cap) and OOM containment's rules (pure)."""

from __future__ import annotations

import pytest

from horus_core import reasoncodes as rc
from horus_core.caps import alone, attempt_cap, format_mib, parse_size, raised, with_margin
from horus_core.containment import CAUSE_CUDA_OOM, CAUSE_GPU_MEMORY_EXCEEDED, Ending, contain
from horus_core.errors import InvalidArgument
from horus_core.model import NO_FLOOR, Job, JobSpec, JobState
from horus_core.validation import validate_spec


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("12GiB", 12288),
        ("12G", 12288),
        ("1.5gib", 1536),
        ("4096", 4096),
        ("4096MiB", 4096),
        ("1TiB", 1 << 20),
        ("4GB", 3815),
        ("1.5gb", 1431),
        ("500MB", 477),
        ("1TB", 953675),
    ],  # GB, MB, TB: decimal (10^9 ...)
)
def test_sizes_as_users_write_them(text: str, mib: int) -> None:
    assert parse_size(text) == mib


@pytest.mark.parametrize("text", ["", "12 apples", "-1G", "0", "5TiB", "1e3"])
def test_bad_sizes_are_refused_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_size(text)


def test_the_margin_is_ten_percent_at_least_256_mib_rounded_up() -> None:
    assert with_margin(1000) == 1280  # +256 (more than 10 %), rounded up to 256
    assert with_margin(10_000) == 11_008  # +1000, rounded up
    assert with_margin(4096) == 4608  # +410 -> 4506 -> 4608
    assert with_margin(0) == 0
    assert raised(4096, 4500) == with_margin(4500) and raised(4096, 100) == with_margin(4096)
    assert format_mib(4096) == "4 GiB" and format_mib(4500) == "4500 MiB" and format_mib(0) == "-"


def test_an_attempt_cap_is_the_declared_one_else_the_footprint() -> None:
    assert attempt_cap(JobSpec(("x",), gpu_memory_mib=4096), 10240) == 4096
    assert attempt_cap(JobSpec(("x",)), 10240) == 10240
    spec = alone(JobSpec(("x",), gpu_memory_mib=4096), 6144)
    assert spec.exclusive and spec.gpu_memory_mib == 6144 and alone(spec, 6144) is spec


def test_validation_of_caps_and_floors() -> None:
    validate_spec(JobSpec(("x",), gpu_memory_mib=4096, min_speed=NO_FLOOR, gpu_types=("h100-1g.10gb",)))
    for bad in (JobSpec(("x",), gpu_memory_mib=-1), JobSpec(("x",), min_speed=-0.5)):
        with pytest.raises(InvalidArgument):
            validate_spec(bad)


def _job(cap: int = 4096, exclusive: bool = False) -> Job:
    spec = JobSpec(("x",), exclusive=exclusive)
    return Job("j", spec, JobState.RUNNING, attempt=1, gpu_memory_cap_mib=cap)


def test_the_watchdogs_victim_runs_again_alone_with_its_peak_plus_the_margin() -> None:
    out = contain(_job(), Ending(CAUSE_GPU_MEMORY_EXCEEDED, 4500, shared=True))
    assert out is not None and out.alone_mib == raised(4096, 4500) and out.code == rc.GPU_MEMORY_EXCEEDED
    assert out.reason.startswith("GpuMemoryExceeded: attempt 1 stopped by the GPU memory watchdog")


def test_an_oom_while_sharing_with_no_neighbour_over_its_cap_is_the_growers() -> None:
    out = contain(_job(), Ending(CAUSE_CUDA_OOM, 3000, shared=True))  # (its own MPS limit refused it)
    assert out is not None and out.alone_mib == raised(4096, 3000) == raised(4096, 0)


def test_a_neighbour_out_of_memory_while_another_was_over_its_cap_runs_again_as_it_was() -> None:
    out = contain(_job(), Ending(CAUSE_CUDA_OOM, 1500, shared=True, neighbour_over=True))
    assert out is not None and out.alone_mib == 0 and out.code == rc.PREEMPTED
    assert "a neighbour grew" in out.reason
    stopped = contain(_job(), Ending(CAUSE_GPU_MEMORY_EXCEEDED, 6000, shared=True, neighbour_over=True))
    assert stopped is not None and stopped.alone_mib > 0  # (over its own cap: the grower all the same)


def test_an_oom_alone_or_of_a_job_alone_is_its_own_failure() -> None:
    assert contain(_job(), Ending(CAUSE_CUDA_OOM, 9000, shared=False)) is None
    assert (
        contain(_job(exclusive=True), Ending(CAUSE_CUDA_OOM, 9000, shared=True)) is None
    )  # (contained once)
    assert contain(_job(), Ending("", 9000, shared=True)) is None
