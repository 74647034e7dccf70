"""The worker's I/O shell around :class:`worker.state.WorkerState`.

It carries out the state machine's effects (start and stop attempts through the runtime, send
updates through the connection), feeds it the events of the stream and the runtime, and runs the
worker's loops: lease ticks, heartbeats (probe readings → GpuStats / JobGpuStats, and on simulated
GPUs each attempt's speed into its ``$HORUS_SPEED_FILE``), and the tails that push each attempt's
log chunks and progress. Blocking work (files, /proc, the probe) runs in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from horus_core.containment import CAUSE_CUDA_OOM, Ending
from horus_core.model import JobState, SlurmTag
from horus_core.plane import Assignment, Kill, LeaseGrant, ToWorker
from worker import messages
from worker.connection import Connection
from worker.files import AttemptFiles, attempts_dir, load_epoch, save_epoch, write_speeds
from worker.gpu.base import GpuInfo, GpuProbe, ProbeTarget
from worker.jobenv import attempt_env
from worker.lease import WatchdogProcess, write_lease
from worker.runtime.base import AttemptKey, ExitStatus, LaunchRequest, RunningAttempt, Runtime
from worker.runtime.containers import ContainerRecords
from worker.sharing.guard import SharingConfig, SharingGuard, Watched
from worker.sharing.oom import is_oom, read_tail
from worker.state import Attempt, Clock, Effect, Send, Start, Stop, WorkerState
from worker.tails import LogTail, ProgressTail, read_tails

log = logging.getLogger(__name__)
SpeedOf = Callable[[str, int], float]
MAX_BACKLOG = 256  # messages queued on the stream before the tails wait
MAX_DRAIN_ROUNDS = 16  # at an attempt's end, up to 16 x 4 chunks at once; the tail loop does the rest


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


@dataclass(frozen=True)
class AgentConfig:
    name: str
    master: str  # host:port
    state_dir: pathlib.Path
    join_token: str = ""
    grace_s: float = 10.0
    credentials: grpc.ChannelCredentials | None = None
    poll_s: float = 0.2  # tails and lease ticks
    watchdog: bool = True  # a lease watchdog process (worker/lease.py) backs the daemon's own checks
    advertise_addr: str = ""  # where other nodes reach this one ("": the master uses what it sees)
    rack: str = ""  # --rack: the rack (switch) this node sits in, reported at registration
    sharing: SharingConfig = field(default_factory=SharingConfig)  # --sharing, the memory watchdog
    slurm: SlurmTag | None = None  # --slurm: the Slurm job this pilot runs in (docs/slurm.md)


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        gpus: Sequence[GpuInfo],
        probe: GpuProbe,
        runtime: Runtime,
        *,
        speed_of: SpeedOf | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.gpus = list(gpus)
        self._probe, self._runtime, self._speed_of = probe, runtime, speed_of
        self.state = WorkerState([g.uuid for g in gpus], clock or SystemClock(), grace_s=config.grace_s)
        self.connection = Connection(config.master, self, credentials=config.credentials)
        self._handles: dict[AttemptKey, RunningAttempt] = {}
        self._pids: dict[AttemptKey, tuple[int, ...]] = {}  # each live attempt's, at the last heartbeat
        self._files: dict[AttemptKey, AttemptFiles] = {}
        self._logs: dict[AttemptKey, LogTail] = {}
        self._progress: dict[AttemptKey, ProgressTail] = {}
        self._tail_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._beat_now = asyncio.Event()
        self._shutdown = asyncio.Event()
        self._drain: tuple[float, str, float] | None = None  # (deadline, reason, end time): request_drain
        self._finished = asyncio.Event()  # set whenever an attempt reaches its final state
        self.state.epoch = load_epoch(config.state_dir)
        self._lease_written = (0.0, 0.0)
        self._watchdog: WatchdogProcess | None = None
        self._containers = ContainerRecords(config.state_dir / "containers")  # read by the watchdog
        self.guard = SharingGuard(
            config.sharing, gpus, probe, config.state_dir, over_cap=self._over_cap, stop=self._stop_for
        )

    # ------------------------------------------------------------------------- lifecycle

    async def run(self) -> None:
        """Until :meth:`request_shutdown`; then stop every attempt, send the finals, close the stream."""
        await asyncio.to_thread(self._containers.clear)  # _recover records what still runs
        await self._recover()
        self._write_lease()
        if self.config.watchdog:
            self._watchdog = await WatchdogProcess.start(self.config.state_dir)
        killed = await self._runtime.remove_orphans(set(self._handles))
        if killed:
            log.warning("killed %d attempt(s) left running by a previous worker: %s", len(killed), killed)
        loops = [
            asyncio.create_task(self.connection.run(), name="connection"),
            asyncio.create_task(self._tick_loop(), name="tick"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._tail_loop(), name="tails"),
            asyncio.create_task(self.guard.run(self._watched), name="memory-watchdog"),
        ]
        try:
            await self._shutdown.wait()
            await self._wind_down(loops[0])
        finally:
            for task in [*loops, *self._tasks]:
                task.cancel()
            await asyncio.gather(*loops, *self._tasks, return_exceptions=True)
            await self.guard.close()
            if self._watchdog is not None:
                await self._watchdog.stop()

    async def _recover(self) -> None:
        """Re-attach what the runtime can (containers); the master decides at registration."""
        for handle in await self._runtime.recover(attempts_dir(self.config.state_dir)):
            key, files = handle.key, AttemptFiles.of(self.config.state_dir, handle.key)
            recorded = await asyncio.to_thread(files.load_assignment)
            spec, gpus = recorded if recorded is not None else (None, ())
            self.state.adopt(key, spec, gpus)
            self._track(key, handle, files)
            log.warning("re-attached %s/%d, left running by a previous worker", key.job_id, key.attempt)

    def _track(self, key: AttemptKey, handle: RunningAttempt, files: AttemptFiles) -> None:
        self._handles[key], self._files[key] = handle, files
        self._record_container(key, handle)
        self._logs[key], self._progress[key] = LogTail(files.log), ProgressTail(files.progress)
        self._spawn(self._watch(key, handle))

    def _record_container(self, key: AttemptKey, handle: RunningAttempt) -> None:
        """A Docker attempt's container, for the lease watchdog (process groups record themselves)."""
        container_id = getattr(handle, "container_id", None)
        if isinstance(container_id, str) and container_id:
            try:
                self._containers.save(key, container_id, str(getattr(handle, "engine", "")))
            except OSError as exc:
                log.warning("cannot record container %s for the lease watchdog: %s", container_id[:12], exc)

    def request_shutdown(self) -> None:
        self.state.shutting_down = True  # at once: an attempt that dies from here on was stopped
        self._shutdown.set()

    def request_drain(self, timeout_s: float, reason: str, end_time: float = 0.0) -> None:
        """Ask the master to drain this node within ``timeout_s`` (a Slurm pilot warned of its
        end, docs/slurm.md); asked again on every new registration until the worker exits."""
        self._drain = (self.state.clock.time() + max(0.0, timeout_s), reason, end_time)
        self._send_drain()

    def _send_drain(self) -> None:
        if self._drain is not None and self.connection.registered:
            deadline, reason, end_time = self._drain
            left = max(0.0, deadline - self.state.clock.time())
            self.connection.send(messages.drain_self(left, reason, end_time))

    async def _wind_down(self, connection_task: asyncio.Task[None]) -> None:
        self._apply(self.state.shutdown())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._until_idle(), self.config.grace_s + 10.0)
        if self.connection.registered:
            await self._pump_tails(drain=True)
            await self.connection.flush(5.0)
        self.connection.close()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(connection_task, 5.0)

    async def _until_idle(self) -> None:
        while not self.state.idle():
            self._finished.clear()
            await self._finished.wait()

    # ------------------------------------------------------------ the stream (StreamHandler)

    def register_message(self) -> messages.Outgoing:
        self.state.stream_opened()
        self.state.prune()
        return messages.register(
            self.config.name,
            self.gpus,
            self.state.running(),
            self.config.join_token,
            self.state.finals(),
            self.state.epoch,
            advertise_addr=self.config.advertise_addr,
            rack=self.config.rack,
            runtime=self._runtime.name,
            slurm=self.config.slurm,
        )

    def on_registered(self, msg: LeaseGrant) -> None:
        effects = self._registered(msg)
        if msg.epoch:
            save_epoch(self.config.state_dir, msg.epoch)
        for tail in self._logs.values():
            tail.rewind()
        self._apply(effects)
        self._send_drain()
        self._beat_now.set()

    def _registered(self, msg: LeaseGrant) -> list[Effect]:
        effects = self.state.on_registered(
            msg.heartbeat_interval_s,
            msg.lease_s,
            epoch=msg.epoch,
            renews_seq=msg.renews_seq,
            kill_grace_s=msg.kill_grace_s,
        )
        self._write_lease()
        return effects

    def _write_lease(self) -> None:
        """Tell the watchdog the current deadline (only when it changed)."""
        lease = (self.state.lease_deadline(), self.state.lease_grace())
        if lease != self._lease_written:
            try:
                write_lease(self.config.state_dir, *lease)
                self._lease_written = lease
            except OSError as exc:
                log.warning("cannot write the lease file: %s", exc)

    def on_message(self, msg: ToWorker) -> None:
        if isinstance(msg, LeaseGrant):
            self._apply(self._registered(msg))
        elif isinstance(msg, Assignment):
            if not msg.job_id or len(msg.job_id) > 256:
                log.warning("ignoring an assignment with a bad job id %r", msg.job_id[:80])
                return
            key = AttemptKey(msg.job_id, msg.attempt)
            env = messages.gang_env(msg)
            self._apply(self.state.on_assignment(key, msg.spec, msg.gpus, env, msg.gpu_memory_cap_mib))
        elif isinstance(msg, Kill):
            self._apply(self.state.on_kill(AttemptKey(msg.job_id, msg.attempt), msg.reason))

    def on_closed(self, why: str) -> None:
        self.state.stream_closed()

    # --------------------------------------------------------------------------- effects

    def _apply(self, effects: Sequence[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Start):
                self._spawn(self._launch(effect))
            elif isinstance(effect, Stop):
                handle = self._handles.get(effect.key)
                if handle is not None:
                    log.info("stopping %s/%d: %s", effect.key.job_id, effect.key.attempt, effect.reason)
                    self._spawn(handle.stop(effect.grace_s, effect.reason))
            elif isinstance(effect, Send):
                self.connection.send(messages.update(effect.update))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("worker task failed", exc_info=task.exception())

    async def _launch(self, start: Start) -> None:
        key = start.key
        files = AttemptFiles.of(self.config.state_dir, key)
        # the worker's own variables, a gang's rendezvous (WORLD_SIZE over all its nodes wins),
        # then the sharing mode's (MPS, HAMi; docs/sharing.md)
        env = (*attempt_env(key, start.gpus, files, self.config.name), *start.env)
        try:
            await asyncio.to_thread(files.prepare, start.spec, start.gpus)
            shared = await self.guard.prepare(
                (key.job_id, key.attempt), start.spec, start.gpus, start.cap_mib
            )
            request = LaunchRequest(key, start.spec, start.gpus, files.log, (*env, *shared.env), shared.binds)
            handle = await self._runtime.start(request)
        except Exception as exc:
            log.warning("cannot start %s/%d: %s", key.job_id, key.attempt, exc)
            self.guard.ended((key.job_id, key.attempt))
            self._apply(self.state.on_start_failed(key, str(exc) or type(exc).__name__))
            self._finished.set()
            return
        log.info("started %s/%d on %s", key.job_id, key.attempt, ",".join(start.gpus))
        self._track(key, handle, files)  # first: a kill that came while starting needs the handle
        self._apply(self.state.on_started(key))

    async def _watch(self, key: AttemptKey, handle: RunningAttempt) -> None:
        try:
            status = await handle.wait()
        except Exception as exc:
            status = ExitStatus(JobState.FAILED, None, f"lost track of the attempt: {exc}")
        exited_at = self.state.clock.monotonic()  # before the drain below: a lapse is judged by this
        ending = await self._ending(key, status)
        self._handles.pop(key, None)
        with contextlib.suppress(OSError):
            self._containers.remove(key)
        if self.connection.registered:
            await self._pump_tails(drain=True, keys={key})
        self._progress.pop(key, None)
        log.info("%s/%d ended: %s (%s)", key.job_id, key.attempt, status.state.value, status.reason)
        effects = self.state.on_exited(key, status, exited_at, ending)
        for final in (e.update for e in effects if isinstance(e, Send) and e.update.key == key):
            if final.state is not status.state:  # e.g. the lease watchdog's kill
                log.info("%s/%d reported %s (%s)", key.job_id, key.attempt, final.state.value, final.reason)
        self._apply(effects)
        self._finished.set()

    # ------------------------------------------------------------- safe sharing (guard)

    async def _ending(self, key: AttemptKey, status: ExitStatus) -> Ending:
        """Its sharing facts (the guard's) and a CUDA OOM its log shows."""
        ending = self.guard.ended((key.job_id, key.attempt))
        files = self._files.get(key)
        failed = status.state is JobState.FAILED and files is not None
        tail = await asyncio.to_thread(read_tail, files.log) if failed and files is not None else b""
        return dataclasses.replace(ending, cause=CAUSE_CUDA_OOM) if is_oom(status.exit_code, tail) else ending

    def _over_cap(self, key: tuple[str, int], reason: str) -> None:
        self._apply(self.state.on_over_cap(AttemptKey(*key), reason))

    def _stop_for(self, key: tuple[str, int], reason: str) -> None:
        self._apply(self.state.on_kill(AttemptKey(*key), reason))

    async def _watched(self) -> list[Watched]:
        """The live attempts as the memory watchdog reads them. Their PIDs are the last heartbeat's
        (a GPU process started since is still found through its parents); only an attempt none has
        seen yet is read now, in a thread: no pass over /proc per attempt twice a second."""
        live = [(a, self._handles[a.key]) for a in self.state.live() if a.key in self._handles and a.spec]
        new = [(a, h) for a, h in live if a.key not in self._pids]
        if new:
            self._pids.update(await asyncio.to_thread(lambda: {a.key: tuple(h.pids()) for a, h in new}))
        return [
            Watched(self._target(a, self._pids.get(a.key, ())), a.cap_mib if a.capped else 0) for a, _ in live
        ]

    def _target(self, a: Attempt, pids: tuple[int, ...]) -> ProbeTarget:
        assert a.spec is not None
        files = self._files.get(a.key)
        memory = str(files.gpu_memory) if files is not None else ""
        return ProbeTarget(a.key.job_id, a.key.attempt, pids, a.gpus, a.spec, memory)

    # ----------------------------------------------------------------------------- loops

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.poll_s)
            self._apply(self.state.tick())
            for key in [k for k in self._logs if k not in self.state.attempts]:
                self._logs.pop(key, None)
                self._files.pop(key, None)

    async def _tail_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.poll_s)
            if self.connection.registered and self.connection.backlog() < MAX_BACKLOG:
                await self._pump_tails()

    async def _pump_tails(self, *, drain: bool = False, keys: set[AttemptKey] | None = None) -> None:
        """Read new log chunks and the latest progress (in a thread) and queue them on the stream."""
        logs = [(k, t) for k, t in self._logs.items() if keys is None or k in keys]
        progress = [(k, t) for k, t in self._progress.items() if keys is None or k in keys]
        async with self._tail_lock:
            for _ in range(MAX_DRAIN_ROUNDS if drain else 1):
                msgs = await asyncio.to_thread(read_tails, logs, progress)
                for msg in msgs:
                    self.connection.send(msg)
                if not msgs:
                    return
                progress = []

    async def _heartbeat_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._beat_now.wait(), self.state.heartbeat_interval_s)
            self._beat_now.clear()
            if self.connection.registered:
                try:
                    await self._heartbeat()
                except Exception:
                    log.exception("heartbeat failed")

    async def _heartbeat(self) -> None:
        live = [(a, self._handles[a.key]) for a in self.state.live() if a.key in self._handles and a.spec]
        pids = await asyncio.to_thread(lambda: {a.key: tuple(h.pids()) for a, h in live})
        self._pids = dict(pids)  # (what the memory watchdog reads until the next heartbeat)
        targets = [self._target(a, pids[a.key]) for a, _ in live]
        try:
            readings, procs = await self._probe.read(targets)
        except Exception as exc:
            log.warning("GPU probe failed: %s", exc)
            readings, procs = [], []
        owner = {pid: key for key, ps in pids.items() for pid in ps}
        self._apply(self.state.tick())  # a lapse no tick has seen yet: the heartbeat says fenced
        seq = self.state.heartbeat_sent()
        hb = messages.heartbeat(readings, procs, owner, self.state.running(), seq, self.state.fenced)
        self.connection.send(hb)
        if self._speed_of is not None:
            speed_of = self._speed_of
            speeds = [(self._files[k], speed_of(k.job_id, k.attempt)) for k in pids if k in self._files]
            await asyncio.to_thread(write_speeds, speeds)
