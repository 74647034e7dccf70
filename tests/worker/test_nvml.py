"""NvmlProbe against a fake pynvml (no GPU here); the fake is checked against the real binding."""

from __future__ import annotations

import importlib.util
import inspect
import pathlib
import re
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest

from horus_core.model import JobSpec, gpu_type_of
from worker.gpu import mig
from worker.gpu import nvml as nvml_probe
from worker.gpu.base import ProbeTarget
from worker.gpu.nvml import NvmlProbe, ProbeUnavailable
from worker.gpu.proctree import OwnerIndex, parent_pid

MIB = 1 << 20


def _load_fake() -> ModuleType:
    path = pathlib.Path(__file__).with_name("fake_pynvml.py")
    spec = importlib.util.spec_from_file_location("fake_pynvml", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_pynvml"] = module
    spec.loader.exec_module(module)
    return module


fake = _load_fake()
FakeGpu = fake.FakeGpu
Proc = fake.c_nvmlProcessInfo_t
Sample = fake.c_nvmlProcessUtilizationSample_t
UUID0 = "GPU-00000000-1111-2222-3333-444444444444"
UUID1 = "GPU-11111111-1111-2222-3333-444444444444"


@pytest.fixture
def proc_root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A fake /proc: 100 (the attempt) -> 101 (sh) -> 102 (python, on the GPU); 555 is foreign."""
    root = tmp_path / "proc"
    tree = [(100, 1, "sh"), (101, 100, "a (weird) name"), (102, 101, "python"), (555, 1, "x")]
    for pid, ppid, comm in tree:
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0\n")
    return root


@pytest.fixture
def gpus() -> Iterator[list[object]]:
    devices = [
        FakeGpu(UUID0, used_bytes=10_000 * MIB, util_gpu=55, util_mem=30, temperature=61, power_mw=250_500),
        FakeGpu(UUID1, name="NVIDIA H100 PCIe", total_bytes=40_000 * MIB),
    ]
    fake.reset(devices)
    yield devices
    fake.reset([])


def _target(*pids: int, job: str = "j1", uuids: tuple[str, ...] = (UUID0,)) -> ProbeTarget:
    return ProbeTarget(job, 1, pids, uuids, JobSpec(command=("train",)))


async def test_open_lists_gpus_by_uuid(gpus: list[FakeGpu], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # the default path: import pynvml
    probe = await NvmlProbe.open()
    infos = await probe.gpus()
    assert [(g.uuid, g.index, g.model, g.memory_mib) for g in infos] == [
        (UUID0, 0, "NVIDIA H100 80GB HBM3", 80 * 1024),
        (UUID1, 1, "NVIDIA H100 PCIe", 40_000),
    ]
    await probe.close()
    assert not fake.INITIALIZED
    assert all(s.freed for s in fake.EVENT_SETS) and len(fake.EVENT_SETS) == 2


async def test_readings(gpus: list[FakeGpu], proc_root: pathlib.Path) -> None:
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    readings, procs = await probe.read([])
    await probe.close()
    r0, r1 = readings
    assert (r0.uuid, r0.util_sm, r0.util_mem) == (UUID0, 55, 30)
    assert (r0.mem_used_mib, r0.mem_total_mib) == (10_000, 81920)
    assert (r0.temperature_c, r0.power_w, r0.ecc_errors) == (61, 250.5, 0)
    assert (r0.xid_events, r0.healthy) == ((), True)
    assert (r1.uuid, r1.mem_total_mib, r1.healthy) == (UUID1, 40_000, True)
    assert procs == []


async def test_calls_run_on_one_thread_off_the_loop(gpus: list[FakeGpu], proc_root: pathlib.Path) -> None:
    fake.CALL_THREADS.clear()
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    await probe.read([])
    await probe.close()
    assert len(fake.CALL_THREADS) == 1
    assert threading.get_ident() not in fake.CALL_THREADS


async def test_processes_are_matched_to_attempts_through_child_pids(
    gpus: list[FakeGpu], proc_root: pathlib.Path
) -> None:
    gpus[0].processes = [Proc(102, 3000 * MIB), Proc(555, 500 * MIB)]
    gpus[0].samples = [Sample(102, 1_000, 40), Sample(102, 2_000, 60), Sample(555, 1_500, 10)]
    gpus[1].processes = [Proc(100, 1000 * MIB), Proc(101, None)]
    gpus[1].samples = [Sample(100, 1_000, 20), Sample(101, 1_100, 5)]
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    _, procs = await probe.read([_target(100, uuids=(UUID0, UUID1))])
    by_key = {(p.pid, p.gpu_uuid): p for p in procs}
    assert set(by_key) == {(100, UUID0), (555, UUID0), (100, UUID1)}
    assert (by_key[100, UUID0].mem_used_mib, by_key[100, UUID0].util_sm) == (3000, 50.0)  # mean of samples
    assert (by_key[555, UUID0].mem_used_mib, by_key[555, UUID0].util_sm) == (500, 10.0)  # unowned: own pid
    assert (by_key[100, UUID1].mem_used_mib, by_key[100, UUID1].util_sm) == (1000, 25.0)  # 100 + child 101

    # The next read asks only for samples newer than the last one seen; none -> 0 %, not None.
    fake.PROCESS_UTIL_QUERIES.clear()
    _, procs = await probe.read([_target(100, uuids=(UUID0, UUID1))])
    await probe.close()
    assert fake.PROCESS_UTIL_QUERIES == [2_000, 1_100]
    assert {(p.pid, p.gpu_uuid): p.util_sm for p in procs}[100, UUID0] == 0.0


async def test_not_supported_fields_are_absent(gpus: list[FakeGpu], proc_root: pathlib.Path) -> None:
    gpus[0].unsupported = {
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetProcessUtilization",
        "nvmlDeviceGetUtilizationRates",
    }
    gpus[0].events_supported = False
    gpus[0].processes = [Proc(102, 2048 * MIB)]
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    readings, procs = await probe.read([_target(100)])
    await probe.close()
    r0 = readings[0]
    assert (r0.util_sm, r0.temperature_c, r0.power_w, r0.ecc_errors, r0.healthy) == (0.0, 0.0, 0.0, 0, True)
    assert r0.mem_used_mib == 10_000
    assert [(p.pid, p.mem_used_mib, p.util_sm) for p in procs] == [(100, 2048, None)]
    assert len(fake.EVENT_SETS) == 2 and fake.EVENT_SETS[0].freed  # the unusable set was freed at once


async def test_lost_gpu_reads_unhealthy(gpus: list[FakeGpu], proc_root: pathlib.Path) -> None:
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    gpus[1].lost = True
    gpus[1].processes = [Proc(102, MIB)]
    readings, procs = await probe.read([_target(100)])
    assert [(r.uuid, r.healthy) for r in readings] == [(UUID0, True), (UUID1, False)]
    assert readings[1].mem_total_mib == 40_000
    assert procs == []
    gpus[1].lost = False  # back after a reset
    readings, _ = await probe.read([])
    await probe.close()
    assert readings[1].healthy


async def test_gpu_lost_at_open_is_left_out(gpus: list[FakeGpu]) -> None:
    gpus[0].lost = True
    probe = await NvmlProbe.open(nvml=fake)
    assert [g.uuid for g in await probe.gpus()] == [UUID1]
    await probe.close()


async def test_xid_events_and_ecc_mark_health(gpus: list[FakeGpu], proc_root: pathlib.Path) -> None:
    gpus[0].pending_xids = [13, 79]  # an application fault, then "fallen off the bus"
    gpus[1].pending_xids = [31]
    probe = await NvmlProbe.open(nvml=fake, proc_root=proc_root)
    readings, _ = await probe.read([])
    assert [(r.xid_events, r.healthy) for r in readings] == [((13, 79), False), ((31,), True)]
    gpus[1].ecc_uncorrected = 2
    readings, _ = await probe.read([])
    await probe.close()
    assert [(r.xid_events, r.healthy) for r in readings] == [((), False), ((), False)]  # a fatal Xid sticks
    assert readings[1].ecc_errors == 2


async def test_nvml_absent_raises_probe_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake.reset([FakeGpu(UUID0)], library_present=False)
    with pytest.raises(ProbeUnavailable, match="NVML cannot be initialised"):
        await NvmlProbe.open(nvml=fake)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed at all
    with pytest.raises(ProbeUnavailable, match="nvidia-ml-py is not installed"):
        await NvmlProbe.open()
    fake.reset([])


async def test_uninitialised_nvml_mid_run_raises(gpus: list[FakeGpu]) -> None:
    probe = await NvmlProbe.open(nvml=fake)
    fake.INITIALIZED = False  # someone else shut NVML down
    with pytest.raises(ProbeUnavailable):
        await probe.read([])
    await probe.close()
    with pytest.raises(ProbeUnavailable, match="closed"):
        await probe.read([])
    await probe.close()  # idempotent


def test_proc_stat_parsing(proc_root: pathlib.Path) -> None:
    assert parent_pid(101, proc_root) == 100  # comm with spaces and parentheses
    assert parent_pid(999, proc_root) is None  # gone
    index = OwnerIndex([100], proc_root)
    assert [index.owner(p) for p in (100, 101, 102, 555, 999)] == [100, 100, 100, None, None]


# ------------------------------------------------------------------ the fake matches the real binding

real = importlib.import_module("pynvml")  # nvidia-ml-py imports without a GPU; nvmlInit would fail


def _called_names() -> set[str]:
    source = "".join(pathlib.Path(inspect.getfile(m)).read_text() for m in (nvml_probe, mig))
    return set(re.findall(r"\.(nvml[A-Z]\w+)\b", source))


def test_every_function_the_probe_calls_exists_in_real_pynvml() -> None:
    called = _called_names()
    assert {"nvmlInit", "nvmlDeviceGetProcessUtilization", "nvmlEventSetWait"} <= called
    for name in sorted(called):
        assert callable(getattr(real, name, None)), f"pynvml has no {name}"
        assert callable(getattr(fake, name, None)), f"fake_pynvml has no {name}"
        real_params = list(inspect.signature(getattr(real, name)).parameters)
        fake_params = list(inspect.signature(getattr(fake, name)).parameters)
        assert fake_params == real_params, f"{name}: fake {fake_params} != real {real_params}"


def test_constants_and_error_classes_match_real_pynvml() -> None:
    pairs = {
        "ERR_UNINITIALIZED": "NVML_ERROR_UNINITIALIZED",
        "ERR_NOT_SUPPORTED": "NVML_ERROR_NOT_SUPPORTED",
        "ERR_NO_PERMISSION": "NVML_ERROR_NO_PERMISSION",
        "ERR_NOT_FOUND": "NVML_ERROR_NOT_FOUND",
        "ERR_DRIVER_NOT_LOADED": "NVML_ERROR_DRIVER_NOT_LOADED",
        "ERR_TIMEOUT": "NVML_ERROR_TIMEOUT",
        "ERR_LIBRARY_NOT_FOUND": "NVML_ERROR_LIBRARY_NOT_FOUND",
        "ERR_FUNCTION_NOT_FOUND": "NVML_ERROR_FUNCTION_NOT_FOUND",
        "ERR_GPU_IS_LOST": "NVML_ERROR_GPU_IS_LOST",
        "ERR_LIB_RM_VERSION_MISMATCH": "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "TEMPERATURE_GPU": "NVML_TEMPERATURE_GPU",
        "MEMORY_ERROR_TYPE_UNCORRECTED": "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
        "VOLATILE_ECC": "NVML_VOLATILE_ECC",
        "EVENT_TYPE_XID_CRITICAL_ERROR": "nvmlEventTypeXidCriticalError",
    }
    for ours, theirs in pairs.items():
        assert getattr(nvml_probe, ours) == getattr(real, theirs), ours
    for name in [n for n in dir(fake) if n.startswith(("NVML_", "nvmlEventType"))]:
        assert getattr(fake, name) == getattr(real, name), name
    for code, fake_cls in fake.NVMLError._valClassMapping.items():
        assert type(real.NVMLError(code)).__name__ == fake_cls.__name__, code  # same code -> same class
        assert issubclass(getattr(real, fake_cls.__name__), real.NVMLError)
    lost = real.NVMLError(real.NVML_ERROR_GPU_IS_LOST)
    assert type(lost).__name__ == "NVMLError_GpuIsLost" and lost.value == 15
    assert type(fake.NVMLError(15)).__name__ == "NVMLError_GpuIsLost"
    assert isinstance(fake.NVMLError(3), fake.NVMLError_NotSupported)


async def test_real_nvml_opens_or_says_why() -> None:
    """On a host without the NVIDIA driver the real binding gives ProbeUnavailable, not a crash."""
    try:
        probe = await NvmlProbe.open()
    except ProbeUnavailable as err:
        assert "NVML" in str(err)
        return
    try:  # a GPU host: every GPU has a UUID and a reading
        infos = await probe.gpus()
        readings, _ = await probe.read([])
        assert [r.uuid for r in readings] == [g.uuid for g in infos]
    finally:
        await probe.close()


# ------------------------------------------------------------------ MIG instances as devices


async def test_mig_instances_are_devices_of_their_own_with_their_memory_and_share() -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    gib = 1 << 30
    instances: list[object] = [
        FakeGpu("MIG-aaaa", name=f"{h100} MIG 3g.40gb", total_bytes=40 * gib, slices=3),
        None,  # (an empty slot)
        FakeGpu("MIG-bbbb", name="unnamed", total_bytes=10 * gib, slices=1),  # (no profile in the name)
    ]
    instances[0].processes = [Proc(4242, 3 * gib)]  # type: ignore[attr-defined]
    parent = FakeGpu(UUID0, name=h100, mig_mode=1, mig=instances)
    fake.reset([FakeGpu(UUID1, name="Tesla V100-SXM2-16GB"), parent])
    probe = await NvmlProbe.open(nvml=fake)
    try:
        gpus = await probe.gpus()
        assert [(g.uuid, g.index, g.memory_mib, g.parent_uuid) for g in gpus] == [
            (UUID1, 0, 80 * 1024, ""),
            ("MIG-aaaa", 1, 40 * 1024, UUID0),
            ("MIG-bbbb", 2, 10 * 1024, UUID0),
        ]
        assert [gpu_type_of(g.model) for g in gpus] == ["v100", "h100-3g.40gb", "h100-1g.10gb"]
        assert [round(g.compute_fraction, 3) for g in gpus] == [1.0, round(3 / 7, 3), round(1 / 7, 3)]
        target = ProbeTarget("j", 1, (4242,), ("MIG-aaaa",), JobSpec(("x",)))
        assert [(p.pid, p.gpu_uuid, p.mem_used_mib) for p in await probe.memory([target])] == [
            (4242, "MIG-aaaa", 3072)
        ]
        readings, _ = await probe.read([target])
        assert [r.uuid for r in readings] == [UUID1, "MIG-aaaa", "MIG-bbbb"]
    finally:
        await probe.close()


async def test_a_gpu_with_mig_on_but_no_instance_offers_nothing() -> None:
    fake.reset([FakeGpu(UUID0, mig_mode=1, mig=[None, None])])
    probe = await NvmlProbe.open(nvml=fake)
    try:
        assert await probe.gpus() == []
    finally:
        await probe.close()
