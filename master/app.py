"""Assembling the master: store -> services -> gRPC servicers, and its start / stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType

import grpc

from horus_core.gen import client_pb2_grpc as cgrpc
from horus_core.gen import worker_pb2_grpc as wgrpc
from horus_core.interference import InterferenceModel, default_model
from horus_core.interference.table import load_table
from horus_core.policies import Policy, make_policy
from horus_core.policies.optimus import OptimusPolicy
from horus_core.queues import QueuedPolicy, load_config
from master.api.client import HorusServicer
from master.api.decode import DecodeGuard
from master.api.worker import WorkerServicer
from master.auth import AuthInterceptor, TokenTable
from master.clock import Clock, SystemClock
from master.config import MAX_MESSAGE_BYTES, MasterConfig
from master.http.run import HttpSide
from master.learning.learner import Learner
from master.loopmon import LoopMonitor, TimedAttempts
from master.observe.view import ViewSources
from master.services.core import Core
from master.services.events import EventBus, JobEvent
from master.services.floor import FloorEnforcer
from master.services.joblogs import LogReader
from master.services.jobs import JobService
from master.services.logs import DbLogStore, LogStore
from master.services.nodes import NodeRegistry
from master.services.progress import ProgressKeeper
from master.services.queues import QueueService
from master.services.restore import restore_policy_state
from master.services.scheduler import Scheduler
from master.services.service import ServiceDesk
from master.services.workers import WorkerPlane
from master.store import Store
from master.store.lease import Fence

log = logging.getLogger(__name__)


def scheduler_for(
    core: Core, policy: Policy, liveness: Callable[[], Awaitable[None]], service: ServiceDesk | None = None
) -> Scheduler:
    """The scheduling loop over the master's parts (also what bench/master_pass.py times)."""
    floor = FloorEnforcer(
        min_speed=core.config.min_speed,
        clock=core.clock,
        live=lambda: core.writer.live,
        measure=ViewSources(core.store.read, core.registry, core.learner, lambda: core.writer.live).speeds,
        min_run_s=core.config.min_run_s,
    )
    return Scheduler(
        config=core.config, clock=core.clock, registry=core.registry, writer=core.writer,
        dispatch=core.dispatch, wakeup=core.wakeup, learner=core.learner, lock=core.lock,
        policy=policy, liveness=liveness, floor=floor, progress=core.progress, service=service,
        positions=core.set_positions,
    )  # fmt: skip


class Master:
    """``async with Master(config) as m:`` serves on ``m.port`` until the block ends."""

    def __init__(
        self,
        config: MasterConfig,
        *,
        clock: Clock | None = None,
        policy: Policy | None = None,
        interference: InterferenceModel | None = None,
        tokens: TokenTable | None = None,
        http_listen: str | None = None,
        metrics_listen: str | None = None,
        monitor: LoopMonitor | None = None,
        fence: Fence | None = None,
    ) -> None:
        self.config = config
        self._fence = fence  # PostgreSQL with standbys: the leader's lease (master/ha.py)
        self.clock: Clock = clock or SystemClock()
        self._policy = policy
        self._interference = interference
        self._tokens = tokens
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self.monitor = monitor or LoopMonitor()
        self._monitor_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._listen_http = (http_listen, metrics_listen)  # dashboard, /metrics (None: off)

    async def start(self) -> None:
        cfg = self.config
        if self._tokens is None and cfg.auth_tokens is not None:
            self._tokens = TokenTable.load(cfg.auth_tokens)
        model = self._interference if self._interference is not None else _model(cfg)
        policy = self._policy or make_policy(cfg.policy, model, round_s=cfg.round_s, objective=cfg.objective)
        if cfg.optimus_replan_s is not None and isinstance(policy, OptimusPolicy):
            policy.replan_s = cfg.optimus_replan_s
        if cfg.queues is not None:  # one wrapper gives every policy queues and quotas
            policy = QueuedPolicy(policy, load_config(str(cfg.queues)), min_run_s=cfg.min_run_s)
        self.store = await Store.open(
            cfg.db,
            group_commit=cfg.group_commit,
            max_batch=cfg.max_batch,
            commit_delay_s=cfg.commit_delay_s,
            fence=self._fence,
        )
        try:
            await self._build(policy, model)
            await self.core.writer.load_live()
            for job in self.core.writer.live.jobs():  # the model cards of the live jobs
                self.core.learner.note_card(job)
            core = self.core  # progress journals, attained service, fair-share usage
            await restore_policy_state(policy, read=self.store.read, clock=core.clock, progress=core.progress)
            learned = await self.core.learner.load()  # before the first pass: no policy runs yet
            if learned:
                log.info("interference model: %d stored observations loaded", learned)
            await self.service.load()  # (before the nodes: they take their cordons from it)
            await self.plane.load()
            held = core.gangs.stopping.after_restart(core.writer.live.jobs(), core.registry)
            if held:
                log.info("%d part(s) of re-queued attempts held until their nodes report them ended", held)
            self.port = await self._serve()
            await self.http.start(*self._listen_http)
        except BaseException:
            if self._server is not None:
                await self._server.stop(None)
            await self.store.close()
            raise
        self._loop_task = asyncio.create_task(self._schedule(), name="horus-scheduler")
        self._monitor_task = asyncio.create_task(self.monitor.run(), name="horus-loop-monitor")
        where = self.store.target.describe() if self.store.target else cfg.db_path
        log.info("master started: policy %s, db %s, port %d", policy.name, where, self.port)

    async def _schedule(self) -> None:
        """The scheduling loop; a leader that just took over first waits one heartbeat interval,
        so the workers re-register and are reconciled before anything is placed (docs/ha.md)."""
        if self._fence is not None:
            await asyncio.sleep(self.config.heartbeat_s)
        await self.scheduler.run()

    async def _build(self, policy: Policy, model: InterferenceModel) -> None:
        cfg = self.config
        events = EventBus(max_subscribers=cfg.max_watchers, queue_size=cfg.watch_queue)
        logs = (  # (PostgreSQL: in the database, where every master reads them; issue 39)
            DbLogStore(self.store, cfg.max_log_bytes)
            if self.store.read.pg
            else LogStore(cfg.logs_dir, cfg.max_log_bytes)
        )
        events.add_listener(lambda ev: _wake_logs(logs, ev))
        events.add_listener(lambda ev: _note_card(self.core.learner, ev))  # (cards: to the model)
        # A progress report counts once two heartbeats have shown who shares the job's GPUs.
        learner = Learner(self.store, self.clock, model, settle_s=2 * cfg.heartbeat_s)
        core = self.core = Core(cfg, self.store, self.clock, NodeRegistry(), events, logs, learner)
        core.gangs.ports_range = cfg.gang_ports
        core.progress = progress = ProgressKeeper(self.store, self.clock)
        service = self.service = ServiceDesk(  # cordons, drains, quarantines (issue 13)
            store=self.store, clock=core.clock, registry=core.registry, writer=core.writer, wakeup=core.wakeup
        )
        reg, clock, writer, dispatch, wakeup = (
            core.registry,
            core.clock,
            core.writer,
            core.dispatch,
            core.wakeup,
        )
        read = self.store.read
        self.plane = WorkerPlane(
            config=cfg, store=self.store, clock=clock, registry=reg, writer=writer, dispatch=dispatch,
            wakeup=wakeup, learner=learner, lock=core.lock,
        )  # fmt: skip
        self.attempts = TimedAttempts(
            plane=self.plane, registry=reg, clock=clock, writer=writer, dispatch=dispatch, wakeup=wakeup,
            learner=learner, logs=logs, read=read, progress=progress, service=service,
        )  # fmt: skip
        qfile = self.config.queues
        self.queues: QueueService | None = None
        if isinstance(policy, QueuedPolicy) and qfile is not None:
            self.queues = QueueService(policy, qfile, registry=reg, writer=writer, wakeup=wakeup)
        self.jobs = JobService(
            config=cfg, read=read, clock=clock, registry=reg, writer=writer, dispatch=dispatch,
            wakeup=wakeup, events=events, queues=self.queues, model=model,
        )  # fmt: skip
        self.scheduler = scheduler_for(core, policy, self.plane.check_liveness, service)
        self.attempts.finals.append(self.scheduler.attempt_stopped)  # (a preempted attempt ended)
        self.policy = policy
        self._sources = ViewSources(read, reg, learner, lambda: writer.live)
        self.http = HttpSide(
            sources=self._sources, live=lambda: writer.live, logs=logs,
            position=core.positions_of, events=events, scheduler=self.scheduler, clock=clock,
            heartbeat_s=cfg.heartbeat_s, tokens=self._tokens, monitor=self.monitor,
            quotas=self.queues.usage_and_warnings if self.queues is not None else None,
        )  # fmt: skip

    async def _serve(self) -> int:
        cfg = self.config
        options = [
            ("grpc.so_reuseport", 0),  # a second master on the same port must fail, not share it
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ("grpc.keepalive_permit_without_calls", 1),
            *cfg.extra_server_options,
        ]
        interceptors: list[grpc.aio.ServerInterceptor] = [DecodeGuard()]  # type: ignore[type-arg]
        if self._tokens is not None:
            interceptors.append(AuthInterceptor(self._tokens))
        server = grpc.aio.server(
            interceptors=interceptors, options=options, maximum_concurrent_rpcs=cfg.max_concurrent_rpcs
        )
        cgrpc.add_HorusServiceServicer_to_server(
            HorusServicer(
                self.core.registry,
                self.store.read,
                self.core.events,
                self.jobs,
                LogReader(self.store.read, self.core.logs),
                self.policy.name,
                monitor=self.monitor,
                heartbeats=self.attempts.heartbeats,
                service=self.service,
                queues=self.queues,
                progress=self.core.progress,
                position=self.core.positions_of,
                speed=self._sources.speed_of,
            ),
            server,
        )
        wgrpc.add_WorkerServiceServicer_to_server(
            WorkerServicer(self.plane, self.attempts, cfg.node_timeout_s, self.service), server
        )
        try:
            creds = server_credentials(cfg)
            if creds is None:
                port = server.add_insecure_port(cfg.listen)
            else:
                port = server.add_secure_port(cfg.listen, creds)
        except RuntimeError as exc:  # grpc reports a failed bind this way
            raise OSError(f"cannot listen on {cfg.listen}: {exc}") from None
        if port == 0:
            raise OSError(f"cannot listen on {cfg.listen}")
        await server.start()
        self._server = server
        return port

    async def reload_queues(self) -> bool:
        """SIGHUP: read the queue file again (a bad one is logged and the old config kept); the
        new one takes over between two scheduling passes."""
        if self.queues is None:
            log.info("SIGHUP: no --queues file to reload")
            return False
        return await self.queues.reload(self.scheduler.pass_lock)

    async def stop(self) -> None:
        """Stop accepting, end the streams, let the writer finish its batch, close the db."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for task in (self._loop_task, self._monitor_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.http.stop()
        self.core.events.close_all()
        for entry in self.core.registry.all():
            if entry.session is not None:
                entry.session.close("the master is shutting down")
        if self._server is not None:
            await self._server.stop(self.config.shutdown_grace_s)
        if self.core.progress is not None:
            await self.core.progress.save(force=True)
        await self.store.close()
        st = self.store.writer.stats
        log.info(
            "master stopped (%d writes in %d commits, largest batch %d)", st.ops, st.batches, st.largest_batch
        )

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def __aenter__(self) -> Master:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _model(cfg: MasterConfig) -> InterferenceModel:
    """The packaged table's model, or one over ``--throughputs`` (checked entry by entry)."""
    if cfg.throughputs is None:
        return default_model()
    return InterferenceModel(load_table(cfg.throughputs))


def _note_card(learner: Learner, ev: JobEvent) -> None:
    if ev.previous is None:  # a submission
        learner.note_card(ev.job)


def _wake_logs(logs: LogStore, ev: JobEvent) -> None:
    logs.wake(ev.job.id)


def server_credentials(cfg: MasterConfig) -> grpc.ServerCredentials | None:
    """TLS when a certificate is configured; mutual TLS (client certificates required) with a CA."""
    if cfg.tls_cert is None or cfg.tls_key is None:
        return None
    pair = [(cfg.tls_key.read_bytes(), cfg.tls_cert.read_bytes())]
    if cfg.tls_client_ca is None:
        return grpc.ssl_server_credentials(pair)
    return grpc.ssl_server_credentials(
        pair, root_certificates=cfg.tls_client_ca.read_bytes(), require_client_auth=True
    )
