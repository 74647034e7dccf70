"""A fake ``pynvml`` (nvidia-ml-py) for tests: same names, signatures, error classes and codes.

State is module-level, like the real binding's: tests call :func:`reset` with the GPUs they want,
then hand this module to the probe (``sys.modules["pynvml"]`` or ``NvmlProbe.open(nvml=...)``).
Every call records the thread it ran on in ``CALL_THREADS``.
"""

from __future__ import annotations

import string
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

# --- constants, as in pynvml -------------------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlEventTypeNone = 0x0000000000000000


class NVMLError(Exception):
    """Maps a code to its subclass on construction, like the real ``NVMLError.__new__``."""

    _valClassMapping: dict[int, type[NVMLError]] = {}  # noqa: RUF012 - the real name and shape
    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int) -> None:
        super().__init__(value)

    def __str__(self) -> str:
        return f"NVML error {self.value}"


def _make_error_classes() -> None:
    """``NVML_ERROR_GPU_IS_LOST`` -> ``NVMLError_GpuIsLost``, the real binding's naming rule."""
    module = sys.modules[__name__]
    for name in [n for n in dir(module) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        value = getattr(module, name)
        cls = type(class_name, (NVMLError,), {})
        setattr(module, class_name, cls)
        NVMLError._valClassMapping[value] = cls


_make_error_classes()


# --- result objects -------------------------------------------------------------------------
@dataclass
class c_nvmlMemory_t:
    total: int
    free: int
    used: int


@dataclass
class c_nvmlUtilization_t:
    gpu: int
    memory: int


@dataclass
class c_nvmlProcessInfo_t:
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class c_nvmlProcessUtilizationSample_t:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int = 0
    encUtil: int = 0
    decUtil: int = 0


@dataclass
class c_nvmlEventData_t:
    device: Any
    eventType: int
    eventData: int
    gpuInstanceId: int = 0
    computeInstanceId: int = 0


# --- the fake hardware ---------------------------------------------------------------------
@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    total_bytes: int = 80 * 1024 * 1024 * 1024
    used_bytes: int = 0
    util_gpu: int = 0
    util_mem: int = 0
    temperature: int = 40
    power_mw: int = 70_000
    ecc_uncorrected: int = 0
    processes: list[c_nvmlProcessInfo_t] = field(default_factory=list)
    samples: list[c_nvmlProcessUtilizationSample_t] = field(default_factory=list)
    pending_xids: list[int] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)  # function names that raise NotSupported
    lost: bool = False
    events_supported: bool = True
    # MIG: the mode (1 = enabled) and, when enabled, its instances (slots of 7; None = empty),
    # each a FakeGpu of its own whose ``slices`` are its compute slices
    mig_mode: int = 0
    mig: list[FakeGpu | None] = field(default_factory=list)
    slices: int = 0


@dataclass(frozen=True)
class _Handle:
    index: int
    mig: int = -1  # a MIG instance's slot on GPU ``index`` (-1: the GPU itself)


@dataclass
class c_nvmlDeviceAttributes:
    multiprocessorCount: int
    gpuInstanceSliceCount: int
    memorySizeMB: int


@dataclass
class _EventSet:
    devices: list[int] = field(default_factory=list)
    freed: bool = False


GPUS: list[FakeGpu] = []
LIBRARY_PRESENT = True
INITIALIZED = False
CALL_THREADS: set[int] = set()
EVENT_SETS: list[_EventSet] = []
PROCESS_UTIL_QUERIES: list[int] = []  # the timeStamp argument of each nvmlDeviceGetProcessUtilization


def reset(gpus: list[FakeGpu], *, library_present: bool = True) -> None:
    global LIBRARY_PRESENT, INITIALIZED
    GPUS[:] = gpus
    LIBRARY_PRESENT = library_present
    INITIALIZED = False
    CALL_THREADS.clear()
    EVENT_SETS.clear()
    PROCESS_UTIL_QUERIES.clear()


def _enter(fn: str) -> None:
    CALL_THREADS.add(threading.get_ident())
    if not LIBRARY_PRESENT:
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
    if not INITIALIZED:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _gpu(handle: _Handle, fn: str) -> FakeGpu:
    _enter(fn)
    gpu = GPUS[handle.index]
    if handle.mig >= 0:
        instance = gpu.mig[handle.mig]
        assert instance is not None
        gpu = instance
    if gpu.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    if fn in gpu.unsupported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu


# --- the API ---------------------------------------------------------------------------------
def nvmlInit() -> None:
    global INITIALIZED
    CALL_THREADS.add(threading.get_ident())
    if not LIBRARY_PRESENT:
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
    INITIALIZED = True


def nvmlShutdown() -> None:
    global INITIALIZED
    _enter("nvmlShutdown")
    INITIALIZED = False


def nvmlDeviceGetCount() -> int:
    _enter("nvmlDeviceGetCount")
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _enter("nvmlDeviceGetHandleByIndex")
    if not 0 <= index < len(GPUS):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    return _gpu(handle, "nvmlDeviceGetUUID").uuid


def nvmlDeviceGetName(handle: _Handle) -> str:
    return _gpu(handle, "nvmlDeviceGetName").name


def nvmlDeviceGetMemoryInfo(handle: _Handle, version: int | None = None) -> c_nvmlMemory_t:
    g = _gpu(handle, "nvmlDeviceGetMemoryInfo")
    return c_nvmlMemory_t(g.total_bytes, g.total_bytes - g.used_bytes, g.used_bytes)


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:
    g = _gpu(handle, "nvmlDeviceGetUtilizationRates")
    return c_nvmlUtilization_t(g.util_gpu, g.util_mem)


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetTemperature")
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return g.temperature


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetPowerUsage").power_mw


def nvmlDeviceGetTotalEccErrors(handle: _Handle, errorType: int, counterType: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetTotalEccErrors")
    return g.ecc_uncorrected if errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 0


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[c_nvmlProcessInfo_t]:
    return list(_gpu(handle, "nvmlDeviceGetComputeRunningProcesses").processes)


def nvmlDeviceGetProcessUtilization(
    handle: _Handle, timeStamp: int
) -> list[c_nvmlProcessUtilizationSample_t]:
    g = _gpu(handle, "nvmlDeviceGetProcessUtilization")
    PROCESS_UTIL_QUERIES.append(timeStamp)
    fresh = [s for s in g.samples if s.timeStamp > timeStamp]
    if not fresh:  # the real call answers NOT_FOUND when no sample is newer than timeStamp
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return fresh


def nvmlDeviceGetMigMode(device: _Handle) -> tuple[int, int]:
    g = _gpu(device, "nvmlDeviceGetMigMode")
    return g.mig_mode, g.mig_mode


def nvmlDeviceGetMaxMigDeviceCount(device: _Handle) -> int:
    return 7 if _gpu(device, "nvmlDeviceGetMaxMigDeviceCount").mig_mode else 0


def nvmlDeviceGetMigDeviceHandleByIndex(device: _Handle, index: int) -> _Handle:
    g = _gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex")
    if not g.mig_mode or index >= 7:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if index >= len(g.mig) or g.mig[index] is None:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _Handle(device.index, index)


def nvmlDeviceGetAttributes(device: _Handle) -> c_nvmlDeviceAttributes:
    g = _gpu(device, "nvmlDeviceGetAttributes")
    if not g.slices:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return c_nvmlDeviceAttributes(16 * g.slices, g.slices, g.total_bytes >> 20)


def nvmlEventSetCreate() -> _EventSet:
    _enter("nvmlEventSetCreate")
    event_set = _EventSet()
    EVENT_SETS.append(event_set)
    return event_set


def nvmlDeviceRegisterEvents(handle: _Handle, eventTypes: int, eventSet: _EventSet) -> None:
    g = _gpu(handle, "nvmlDeviceRegisterEvents")
    if not g.events_supported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    eventSet.devices.append(handle.index)


def nvmlEventSetWait(eventSet: _EventSet, timeoutms: int) -> c_nvmlEventData_t:
    _enter("nvmlEventSetWait")
    for index in eventSet.devices:
        g = GPUS[index]
        if g.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if g.pending_xids:
            return c_nvmlEventData_t(_Handle(index), nvmlEventTypeXidCriticalError, g.pending_xids.pop(0))
    raise NVMLError(NVML_ERROR_TIMEOUT)


def nvmlEventSetFree(eventSet: _EventSet) -> None:
    _enter("nvmlEventSetFree")
    eventSet.freed = True
