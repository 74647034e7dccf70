"""The worker's safe-sharing shell (docs/sharing.md): each attempt's sharing environment, the MPS
daemons of its GPUs, and the GPU memory watchdog.

- :meth:`SharingGuard.prepare`, before an attempt starts: the variables of the worker's mode
  (:mod:`worker.sharing.modes`), and in ``mps`` mode the GPU's daemon started first where the
  attempt is its client (:class:`worker.sharing.mps.MpsBook` decides, :class:`MpsDaemon` runs it).
- :meth:`SharingGuard.run`, always, whatever the mode: every ``watch_s`` (at most a second) the
  probe's per-process GPU memory, summed per attempt and GPU; an attempt with a cap above
  ``cap + slack`` is handed to ``over_cap`` (the agent stops it: ``GpuMemoryExceeded``). Each
  attempt's peak and whether another attempt shared one of its GPUs are kept for its final update.
- :meth:`SharingGuard.ended`: an attempt is over; a GPU left idle has its daemon quit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from horus_core.caps import format_mib
from horus_core.containment import CAUSE_GPU_MEMORY_EXCEEDED, Ending
from horus_core.model import JobSpec
from worker.gpu.base import GpuInfo, GpuProbe, ProbeTarget
from worker.sharing import modes
from worker.sharing.modes import Env, Limits, Sharing
from worker.sharing.mps import MpsBook, MpsEffect, QuitDaemon, StartDaemon, StopClients
from worker.sharing.mps_daemon import CONTROL, MpsDaemon
from worker.sharing.watchdog import DEFAULT_SLACK_MIB, MemoryCap, Peaks, breaches, usage

log = logging.getLogger(__name__)
Key = tuple[str, int]
Bind = tuple[str, str, bool]  # (host path, path in a container, read-only)
MAX_WATCH_S = 1.0


@dataclass(frozen=True)
class SharingConfig:
    mode: Sharing = modes.DEFAULT
    watch_s: float = 0.5  # the watchdog's period (at most MAX_WATCH_S)
    slack_mib: int = DEFAULT_SLACK_MIB
    mps_control: str = CONTROL  # the MPS control binary (a name on PATH or a path)
    hami_lib: pathlib.Path | None = None  # HAMi-core's libvgpu.so (mode hami)


@dataclass(frozen=True)
class Watched:
    """A live attempt as the watchdog sees it: the probe's target and its cap (0: not held)."""

    target: ProbeTarget
    cap_mib: int


@dataclass(frozen=True)
class Prepared:
    env: Env
    binds: tuple[Bind, ...] = ()  # what a container must see (the MPS pipe, HAMi's library)


class SharingGuard:
    def __init__(
        self,
        config: SharingConfig,
        gpus: Sequence[GpuInfo],
        probe: GpuProbe,
        state_dir: pathlib.Path,
        *,
        over_cap: Callable[[Key, str], None],
        stop: Callable[[Key, str], None],
    ) -> None:
        self.config = config
        self._index = {g.uuid: g.index for g in gpus}
        self._probe, self._state_dir = probe, state_dir
        self._over_cap, self._stop = over_cap, stop  # the agent's: stop an attempt, with why
        self.book = MpsBook()
        self.daemons: dict[str, MpsDaemon] = {}
        self.peaks = Peaks()
        self._shared: set[Key] = set()
        self._witnessed: set[Key] = set()  # saw another attempt on its GPUs above its cap
        self._gpus_of: dict[Key, tuple[str, ...]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ attempts

    async def prepare(self, key: Key, spec: JobSpec, gpus: tuple[str, ...], cap_mib: int) -> Prepared:
        """The attempt's sharing variables (and, in mps mode, its GPU's daemon running)."""
        cap = 0 if spec.exclusive else cap_mib
        self._gpus_of[key] = gpus
        self._mark_shared()
        env = modes.common_env(self.config.mode, cap)
        limits = Limits(cap, modes.share_pct(self._jobs_on(gpus)), len(gpus))
        mode = self.config.mode
        if mode is Sharing.MPS:
            eligible = not spec.exclusive and len(gpus) == 1
            _, effects = self.book.starting(key, gpus, eligible)
            await self._carry_out(effects)
            daemon = self.daemons.get(gpus[0])
            if self.book.is_client(key) and daemon is not None:
                pipe = daemon.pipe_dir
                return Prepared(env + modes.mps_env(pipe, limits), ((str(pipe), str(pipe), False),))
        if mode is Sharing.HAMI and self.config.hami_lib is not None and not spec.exclusive:
            lib = self.config.hami_lib
            cache = self._state_dir / "hami" / f"{key[0]}-{key[1]}.cache"
            return Prepared(env + modes.hami_env(lib, cache, limits), ((str(lib), str(lib), True),))
        return Prepared(env)

    def ended(self, key: Key) -> Ending:
        """An attempt is over: its peak GPU memory on one GPU, whether it shared a GPU, and
        whether another attempt on its GPUs was seen above its cap meanwhile."""
        self._gpus_of.pop(key, None)
        shared, witnessed = key in self._shared, key in self._witnessed
        self._shared.discard(key)
        self._witnessed.discard(key)
        self._spawn(self._carry_out(self.book.ended(key)))
        return Ending("", self.peaks.pop(key), shared, witnessed)

    def _jobs_on(self, gpus: tuple[str, ...]) -> int:
        return max((sum(1 for g in self._gpus_of.values() if u in g) for u in gpus), default=1)

    def _mark_shared(self) -> None:
        on: dict[str, list[Key]] = {}
        for key, gpus in self._gpus_of.items():
            for uuid in gpus:
                on.setdefault(uuid, []).append(key)
        for keys in on.values():
            if len(keys) > 1:
                self._shared.update(keys)

    # ------------------------------------------------------------------ the watchdog

    async def run(self, live: Callable[[], Awaitable[list[Watched]]]) -> None:
        """Forever: a reading every ``watch_s``; a failed reading is logged and the next one tried."""
        period = min(MAX_WATCH_S, max(0.05, self.config.watch_s))
        while True:
            await asyncio.sleep(period)
            try:
                await self.check(await live())
            except Exception as exc:
                log.warning("GPU memory watchdog: reading failed: %s", exc)

    async def check(self, watched: list[Watched]) -> None:
        """One reading: peaks, sharing, and the attempts above their cap handed to ``over_cap``."""
        self._mark_shared()
        if not watched:
            return
        readings = await self._probe.memory([w.target for w in watched])
        caps = [MemoryCap(w.target.job_id, w.target.attempt, w.target.pids, w.cap_mib) for w in watched]
        self.peaks.observe(usage(caps, readings))
        for b in breaches(caps, readings, self.config.slack_mib):
            key = (b.cap.job_id, b.cap.attempt)
            cap, slack = format_mib(b.cap.cap_mib), self.config.slack_mib
            reason = (
                f"{CAUSE_GPU_MEMORY_EXCEEDED}: used {format_mib(b.used_mib)} of GPU memory on "
                f"{b.gpu_uuid}, above its cap {cap} (+{slack} MiB slack)"
            )
            log.warning("%s/%d: %s", key[0], key[1], reason)
            self._witnessed.update(k for k, gpus in self._gpus_of.items() if k != key and b.gpu_uuid in gpus)
            self._over_cap(key, reason)

    # ------------------------------------------------------------------ MPS daemons

    async def _carry_out(self, effects: list[MpsEffect]) -> None:
        for e in effects:
            if isinstance(e, StartDaemon):
                await self._start(e.gpu)
            elif isinstance(e, QuitDaemon):
                daemon = self.daemons.get(e.gpu)
                if daemon is not None:
                    await daemon.quit()
            elif isinstance(e, StopClients):
                for key in e.keys:
                    self._stop(key, e.reason)

    async def _start(self, uuid: str) -> None:
        daemon = self.daemons.get(uuid)
        if daemon is None:
            daemon = MpsDaemon(
                uuid, self._index.get(uuid, 0), self._state_dir, self._crashed, self.config.mps_control
            )
            self.daemons[uuid] = daemon
        try:
            await daemon.start()
        except (RuntimeError, OSError) as exc:
            log.error("MPS on GPU %s: %s; its jobs run time-sliced", uuid, exc)
            self.book.start_failed(uuid)

    def _crashed(self, uuid: str) -> None:
        self._spawn(self._carry_out(self.book.crashed(uuid)))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """At the worker's end: every daemon quit (killed if it hangs)."""
        for task in list(self._tasks):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        for daemon in self.daemons.values():
            await daemon.close()
