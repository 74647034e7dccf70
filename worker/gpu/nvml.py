"""The real GPU probe: NVML through nvidia-ml-py (imported as ``pynvml``).

Every NVML call runs on one dedicated thread (NVML handles and event sets stay on it), never on the
event loop. GPUs are identified by UUID. A field NVML does not support on a device is left at its
default (0 / None) instead of failing the reading; a lost GPU reads as ``healthy=False``; an NVML
that cannot be loaded or is not initialised raises :class:`ProbeUnavailable`.

Per-process readings are attributed to attempts: a GPU process is reported under the PID of its
nearest ancestor (itself included) that a :class:`ProbeTarget` names, summed per (owner, GPU), so
``ProcessReading.pid in target.pids`` matches it. A process no target owns keeps its own PID.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import importlib
import logging
import pathlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from horus_core.errors import HorusError
from worker.gpu.base import GpuInfo, GpuProbe, GpuReading, ProbeTarget, ProcessReading
from worker.gpu.mig import mig_enabled, mig_instances
from worker.gpu.proctree import RawProcess, attribute

log = logging.getLogger(__name__)
T = TypeVar("T")

# NVML return codes (nvml.h; stable ABI). tests/worker/test_nvml.py checks them against pynvml.
ERR_UNINITIALIZED = 1
ERR_NOT_SUPPORTED = 3
ERR_NO_PERMISSION = 4
ERR_NOT_FOUND = 6
ERR_DRIVER_NOT_LOADED = 9
ERR_TIMEOUT = 10
ERR_LIBRARY_NOT_FOUND = 12
ERR_FUNCTION_NOT_FOUND = 13
ERR_GPU_IS_LOST = 15
ERR_LIB_RM_VERSION_MISMATCH = 18
TEMPERATURE_GPU = 0
MEMORY_ERROR_TYPE_UNCORRECTED = 1
VOLATILE_ECC = 0
EVENT_TYPE_XID_CRITICAL_ERROR = 0x8

_UNAVAILABLE = frozenset(
    {ERR_UNINITIALIZED, ERR_DRIVER_NOT_LOADED, ERR_LIBRARY_NOT_FOUND, ERR_LIB_RM_VERSION_MISMATCH}
)
_ABSENT = frozenset({ERR_NOT_SUPPORTED, ERR_NO_PERMISSION, ERR_FUNCTION_NOT_FOUND})
# Xids after which the GPU needs a reset or replacement (NVIDIA's Xid catalogue): double-bit ECC,
# PMU/micro-controller halts, page retirement or row-remap failure, NVLink, fallen off the bus,
# uncontained ECC, GSP errors. Application faults (13, 31, 43, 45 ...) do not count. Sticky.
FATAL_XIDS = frozenset({48, 61, 62, 64, 74, 79, 92, 95, 119, 120})
_MIB = 1 << 20
_MAX_EVENTS_PER_READ = 256


class ProbeUnavailable(HorusError):
    """NVML cannot be used on this host (no library, no driver, not initialised)."""


class _GpuLost(Exception):
    pass


@dataclass(slots=True)
class _Device:
    handle: Any
    info: GpuInfo
    event_set: Any | None = None
    last_sample_ts: int = 0
    fatal_xid: bool = False


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlProbe:
    """A :class:`worker.gpu.base.GpuProbe` over NVML. Create with ``await NvmlProbe.open()``."""

    def __init__(
        self,
        nvml: Any,
        executor: concurrent.futures.ThreadPoolExecutor,
        devices: list[_Device],
        proc_root: pathlib.Path,
    ) -> None:
        self._nvml = nvml
        self._executor = executor
        self._devices = devices
        self._proc_root = proc_root
        self._closed = False

    @classmethod
    async def open(cls, *, nvml: Any = None, proc_root: pathlib.Path = pathlib.Path("/proc")) -> NvmlProbe:
        """Load and initialise NVML and enumerate the GPUs; :class:`ProbeUnavailable` if it can't."""
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nvml")
        loop = asyncio.get_running_loop()
        try:
            module, devices = await loop.run_in_executor(executor, _open_sync, nvml)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(module, executor, devices, proc_root)

    async def gpus(self) -> list[GpuInfo]:
        return [d.info for d in self._devices]

    async def read(self, running: Sequence[ProbeTarget]) -> tuple[list[GpuReading], list[ProcessReading]]:
        if self._closed:
            raise ProbeUnavailable("the NVML probe is closed")
        targets = tuple(running)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._read_sync, targets)

    async def memory(self, running: Sequence[ProbeTarget]) -> list[ProcessReading]:
        if self._closed:
            raise ProbeUnavailable("the NVML probe is closed")
        targets = tuple(running)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._memory_sync, targets)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_sync)
        finally:
            self._executor.shutdown(wait=False)

    # ------------------------------------------------------------------ on the NVML thread only

    def _call(self, fn: Callable[..., T], *args: Any) -> T | None:
        """Call NVML: None where the field is not supported, _GpuLost / ProbeUnavailable raised."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as err:
            _absent(err, getattr(fn, "__name__", "?"))
            return None

    def _read_sync(self, targets: tuple[ProbeTarget, ...]) -> tuple[list[GpuReading], list[ProcessReading]]:
        readings: list[GpuReading] = []
        raw: list[RawProcess] = []
        for dev in self._devices:
            try:
                reading, procs = self._read_device(dev)
            except _GpuLost:
                log.error("GPU %s is lost", dev.info.uuid)
                reading = GpuReading(dev.info.uuid, 0.0, 0.0, 0, dev.info.memory_mib, healthy=False)
                procs = []
            readings.append(reading)
            raw.extend(procs)
        return readings, attribute(raw, targets, self._proc_root)

    def _memory_sync(self, targets: tuple[ProbeTarget, ...]) -> list[ProcessReading]:
        raw: list[RawProcess] = []
        for dev in self._devices:
            try:
                procs = self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, dev.handle) or []
            except _GpuLost:
                continue
            raw += [RawProcess(int(p.pid), dev.info.uuid, _mib(p), None) for p in procs]
        return attribute(raw, targets, self._proc_root)

    def _read_device(self, dev: _Device) -> tuple[GpuReading, list[RawProcess]]:
        nv, h, uuid = self._nvml, dev.handle, dev.info.uuid
        mem = self._call(nv.nvmlDeviceGetMemoryInfo, h)
        util = self._call(nv.nvmlDeviceGetUtilizationRates, h)
        temp = self._call(nv.nvmlDeviceGetTemperature, h, TEMPERATURE_GPU)
        power_mw = self._call(nv.nvmlDeviceGetPowerUsage, h)
        ecc = self._call(nv.nvmlDeviceGetTotalEccErrors, h, MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC)
        xids = self._drain_xids(dev)
        dev.fatal_xid = dev.fatal_xid or any(x in FATAL_XIDS for x in xids)
        ecc_errors = int(ecc or 0)
        reading = GpuReading(
            uuid=uuid,
            util_sm=float(util.gpu) if util is not None else 0.0,
            util_mem=float(util.memory) if util is not None else 0.0,
            mem_used_mib=int(mem.used) // _MIB if mem is not None else 0,
            mem_total_mib=int(mem.total) // _MIB if mem is not None else dev.info.memory_mib,
            temperature_c=float(temp) if temp is not None else 0.0,
            power_w=float(power_mw) / 1000.0 if power_mw is not None else 0.0,
            ecc_errors=ecc_errors,
            xid_events=tuple(xids),
            healthy=not dev.fatal_xid and ecc_errors == 0,
        )
        return reading, self._read_processes(dev)

    def _read_processes(self, dev: _Device) -> list[RawProcess]:
        procs = self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, dev.handle) or []
        if not procs:
            return []
        util = self._process_util(dev)
        out = []
        for p in procs:
            sm = util.get(int(p.pid), 0.0) if util is not None else None
            out.append(RawProcess(int(p.pid), dev.info.uuid, _mib(p), sm))
        return out

    def _process_util(self, dev: _Device) -> dict[int, float] | None:
        """Mean SM % per PID over the samples since the last read; None if not supported."""
        try:
            samples = self._nvml.nvmlDeviceGetProcessUtilization(dev.handle, dev.last_sample_ts)
        except self._nvml.NVMLError as err:
            # No sample since last_sample_ts: NVML says NOT_FOUND; the binding raises NVMLError(0)
            # when the sizing call succeeds with an empty buffer.
            if getattr(err, "value", None) in (ERR_NOT_FOUND, 0):
                return {}
            _absent(err, "nvmlDeviceGetProcessUtilization")
            return None
        sums: dict[int, list[float]] = {}
        for s in samples:
            sums.setdefault(int(s.pid), []).append(float(s.smUtil))
            dev.last_sample_ts = max(dev.last_sample_ts, int(s.timeStamp))
        return {pid: sum(v) / len(v) for pid, v in sums.items()}

    def _drain_xids(self, dev: _Device) -> list[int]:
        if dev.event_set is None:
            return []
        xids: list[int] = []
        for _ in range(_MAX_EVENTS_PER_READ):
            try:
                data = self._nvml.nvmlEventSetWait(dev.event_set, 0)
            except self._nvml.NVMLError as err:
                if getattr(err, "value", None) != ERR_TIMEOUT:  # timeout: no more events
                    _absent(err, "nvmlEventSetWait")
                break
            if int(data.eventType) & EVENT_TYPE_XID_CRITICAL_ERROR:
                xids.append(int(data.eventData))
        return xids

    def _close_sync(self) -> None:
        for dev in self._devices:
            if dev.event_set is not None:
                self._quiet(self._nvml.nvmlEventSetFree, dev.event_set)
                dev.event_set = None
        self._quiet(self._nvml.nvmlShutdown)

    def _quiet(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except self._nvml.NVMLError as err:
            log.debug("NVML %s at close: %s", getattr(fn, "__name__", fn), err)


def _mib(proc: Any) -> int:
    """A process's GPU memory in MiB (NVML gives None where it may not say)."""
    used = getattr(proc, "usedGpuMemory", None)
    return int(used) // _MIB if used else 0


def _absent(err: Exception, what: str) -> None:
    """Classify a failed NVML call whose field is then absent: raise if the GPU or NVML is gone."""
    code = getattr(err, "value", None)
    if code == ERR_GPU_IS_LOST:
        raise _GpuLost from err
    if code in _UNAVAILABLE:
        raise ProbeUnavailable(f"NVML unavailable: {err}") from err
    if code not in _ABSENT:
        log.warning("NVML %s failed: %s", what, err)


def _open_sync(nvml: Any) -> tuple[Any, list[_Device]]:
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError as err:
            raise ProbeUnavailable("nvidia-ml-py is not installed (import pynvml failed)") from err
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        raise ProbeUnavailable(f"NVML cannot be initialised: {err}") from err
    try:
        count = int(nvml.nvmlDeviceGetCount())
        devices: list[_Device] = []
        for i in range(count):
            for dev in _open_devices(nvml, i):
                devices.append(
                    dataclasses.replace(dev, info=dataclasses.replace(dev.info, index=len(devices)))
                )
    except nvml.NVMLError as err:
        nvml.nvmlShutdown()
        raise ProbeUnavailable(f"NVML cannot list GPUs: {err}") from err
    return nvml, devices


def _open_devices(nvml: Any, index: int) -> list[_Device]:
    """GPU ``index`` as schedulable devices: itself, or, with MIG enabled, each of its MIG
    instances (the worker never changes the MIG configuration: docs/sharing.md)."""
    dev = _open_device(nvml, index)
    if dev is None or not mig_enabled(nvml, dev.handle):
        return [dev] if dev is not None else []
    if dev.event_set is not None:  # (each instance gets its own)
        nvml.nvmlEventSetFree(dev.event_set)
    try:
        instances = mig_instances(nvml, dev.handle, dev.info)
    except nvml.NVMLError as err:
        if getattr(err, "value", None) in _UNAVAILABLE:
            raise
        log.error("the MIG instances of GPU %d cannot be read and are left out: %s", index, err)
        return []
    return [_Device(h, info, _xid_event_set(nvml, h, info.uuid)) for h, info in instances]


def _open_device(nvml: Any, index: int) -> _Device | None:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        name = _text(nvml.nvmlDeviceGetName(handle))
        total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB
    except nvml.NVMLError as err:
        if getattr(err, "value", None) in _UNAVAILABLE:
            raise
        log.error("GPU %d cannot be read and is left out: %s", index, err)
        return None
    return _Device(handle, GpuInfo(uuid, index, name, total), _xid_event_set(nvml, handle, uuid))


def _xid_event_set(nvml: Any, handle: Any, uuid: str) -> Any | None:
    """One event set per GPU for critical Xid events, or None where NVML does not offer them."""
    try:
        event_set = nvml.nvmlEventSetCreate()
    except nvml.NVMLError as err:
        log.info("no NVML event set for %s: %s", uuid, err)
        return None
    try:
        nvml.nvmlDeviceRegisterEvents(handle, EVENT_TYPE_XID_CRITICAL_ERROR, event_set)
    except nvml.NVMLError as err:
        log.info("Xid events not available on %s: %s", uuid, err)
        nvml.nvmlEventSetFree(event_set)
        return None
    return event_set


if TYPE_CHECKING:  # mypy checks that NvmlProbe keeps to the GpuProbe Protocol

    def _conforms(probe: NvmlProbe) -> GpuProbe:
        return probe
