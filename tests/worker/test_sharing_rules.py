"""The worker's sharing rules, alone: the exact environment each mode gives a job, when a GPU's MPS
daemon runs (the pure book), a CUDA out-of-memory exit, and the state machine's memory stop."""

from __future__ import annotations

import pathlib

from horus_core.containment import CAUSE_CUDA_OOM, CAUSE_GPU_MEMORY_EXCEEDED, Ending
from horus_core.model import JobSpec, JobState
from horus_core.testing import FakeClock
from worker.runtime.base import AttemptKey, ExitStatus
from worker.sharing import modes
from worker.sharing.modes import Limits, Sharing
from worker.sharing.mps import MpsBook, QuitDaemon, StartDaemon, StopClients
from worker.sharing.oom import is_oom, read_tail
from worker.state import Send, Start, Stop, WorkerState

A, B, C = ("a", 1), ("b", 1), ("c", 1)


def test_each_mode_gives_a_job_exactly_these_variables(tmp_path: pathlib.Path) -> None:
    limits = Limits(cap_mib=4096, share_pct=50, gpus=2)
    assert modes.common_env(Sharing.TIMESLICE, 4096) == (
        ("HORUS_SHARING", "timeslice"),
        ("HORUS_GPU_MEMORY_CAP_MIB", "4096"),
    )
    assert modes.mps_env(tmp_path / "pipe", limits) == (
        ("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "pipe")),
        ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M,1=4096M"),
        ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"),
    )
    lib, cache = tmp_path / "libvgpu.so", tmp_path / "a.cache"
    assert modes.hami_env(lib, cache, limits) == (
        ("LD_PRELOAD", str(lib)),
        ("CUDA_DEVICE_MEMORY_LIMIT_0", "4096m"),
        ("CUDA_DEVICE_MEMORY_LIMIT_1", "4096m"),
        ("CUDA_DEVICE_SM_LIMIT", "50"),
        ("CUDA_DEVICE_MEMORY_SHARED_CACHE", str(cache)),
    )
    assert [modes.share_pct(n) for n in (1, 2, 3, 9)] == [100, 50, 34, 34]


def test_mps_daemon_starts_on_the_first_share_and_quits_when_the_gpu_is_idle() -> None:
    book = MpsBook()
    assert book.starting(A, ("g0",), eligible=True) == (False, [])  # alone: no daemon
    assert book.starting(B, ("g0",), eligible=True) == (True, [StartDaemon("g0")])
    assert book.starting(C, ("g0",), eligible=True) == (True, [])  # a client of the running one
    assert book.running() == ["g0"] and book.is_client(C) and not book.is_client(A)
    assert book.ended(B) == [] and book.ended(A) == []
    assert book.ended(C) == [QuitDaemon("g0")] and book.running() == []


def test_no_daemon_for_a_job_on_two_gpus_or_with_its_gpus_to_itself() -> None:
    book = MpsBook()
    book.starting(A, ("g0", "g1"), eligible=True)
    assert book.starting(B, ("g0", "g1"), eligible=True) == (False, [])
    assert book.starting(C, ("g1",), eligible=False) == (False, [])


def test_a_crashed_daemon_stops_its_clients_and_is_started_again() -> None:
    book = MpsBook()
    book.starting(A, ("g0",), eligible=True)
    book.starting(B, ("g0",), eligible=True)
    out = book.crashed("g0")
    assert out[0] == StopClients((B,), "the MPS daemon of GPU g0 died; re-queued") and out[1] == StartDaemon(
        "g0"
    )
    assert book.ended(B) == [] and book.ended(A) == [QuitDaemon("g0")]
    assert book.crashed("g0") == []  # (not running: nothing to do)


def test_daemons_are_per_gpu() -> None:
    book = MpsBook()
    for key, gpu in ((A, "g0"), (B, "g0"), (("d", 1), "g1"), (("e", 1), "g1")):
        book.starting(key, (gpu,), eligible=True)
    assert book.running() == ["g0", "g1"]
    assert book.ended(A) == [] and book.ended(B) == [QuitDaemon("g0")] and book.running() == ["g1"]


def test_a_cuda_oom_is_a_non_zero_exit_with_a_signature(tmp_path: pathlib.Path) -> None:
    line = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert is_oom(1, b"...\n" + line) and is_oom(134, b"CUDA_ERROR_OUT_OF_MEMORY")
    assert is_oom(1, b"RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
    assert not is_oom(0, line) and not is_oom(None, line) and not is_oom(1, b"KeyError: 'x'")
    log = tmp_path / "out.log"
    log.write_bytes(b"x" * 100_000 + line)
    assert read_tail(log).endswith(line) and len(read_tail(log)) == 64 * 1024
    assert read_tail(tmp_path / "missing") == b""


def _running(cap: int, exclusive: bool = False) -> tuple[WorkerState, AttemptKey]:
    state = WorkerState(["g0"], FakeClock(), grace_s=5.0)
    state.on_registered(5.0, 60.0)
    key = AttemptKey("j", 1)
    effects = state.on_assignment(key, JobSpec(("x",), exclusive=exclusive), ("g0",), cap_mib=cap)
    assert effects == [Start(key, JobSpec(("x",), exclusive=exclusive), ("g0",), (), cap)]
    state.on_started(key)
    return state, key


def test_an_over_cap_attempt_is_stopped_and_its_final_names_the_cause() -> None:
    state, key = _running(4096)
    assert state.on_over_cap(key, "GpuMemoryExceeded: ...") == [Stop(key, "GpuMemoryExceeded: ...", 5.0)]
    assert state.on_over_cap(key, "again") == []  # (stopping already)
    effects = state.on_exited(
        key, ExitStatus(JobState.CANCELLED, 143, "GpuMemoryExceeded: ..."), None, Ending("", 4500, True)
    )
    final = next(e.update for e in effects if isinstance(e, Send))
    assert final.state is JobState.CANCELLED and final.ending == Ending(CAUSE_GPU_MEMORY_EXCEEDED, 4500, True)


def test_a_job_alone_or_without_cap_is_never_stopped_for_memory() -> None:
    for state, key in (_running(0), _running(4096, exclusive=True)):
        assert state.on_over_cap(key, "GpuMemoryExceeded") == []


def test_an_oom_counts_only_as_a_failure() -> None:
    state, key = _running(4096)
    oom = Ending(CAUSE_CUDA_OOM, 4000, True)
    effects = state.on_exited(key, ExitStatus(JobState.SUCCEEDED, 0, "exited with code 0"), None, oom)
    final = next(e.update for e in effects if isinstance(e, Send))
    assert final.ending == Ending("", 4000, True)
    state, key = _running(4096)
    effects = state.on_exited(key, ExitStatus(JobState.FAILED, 1, "exited with code 1"), None, oom)
    assert next(e.update for e in effects if isinstance(e, Send)).ending == oom
