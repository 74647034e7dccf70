"""DockerRuntime: each attempt is a container on the local Docker Engine (aiodocker, async).

A container gets exactly its scheduled GPUs and the hardened defaults of
:mod:`worker.runtime.docker_config`. Its stdout+stderr are streamed into the attempt's log file as
they come; when it exits, its status is read and the container removed (the log file stays).
Containers carry ``horus.*`` labels, so a restarted worker finds and re-attaches to them
(:meth:`DockerRuntime.recover`) or removes the ones the master no longer wants (``remove_orphans``).
The worker records each attempt's ``container_id`` and ``engine`` for the lease watchdog
(:mod:`worker.runtime.containers`), which stops them when the lease runs out even if the daemon is frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import pathlib
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import aiodocker
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

from horus_core.errors import FailedPrecondition, Unavailable
from horus_core.model import JobState
from worker.runtime.base import AttemptKey, ExitStatus, LaunchRequest, RunningAttempt, Runtime
from worker.runtime.docker_config import (
    ATTEMPT_DIR,
    LABEL_LOG,
    LABEL_WORKER,
    ContainerPolicy,
    check_mounts,
    container_name,
    create_body,
    key_from_labels,
)
from worker.runtime.docker_gang import is_gang_part
from worker.runtime.docker_logs import LogPump

log = logging.getLogger(__name__)
_RECOVERABLE = ("running", "paused", "restarting", "exited")


class DockerAttempt:
    """A running container; :meth:`wait` gives its final status once, the container is then removed."""

    def __init__(
        self,
        container: DockerContainer,
        key: AttemptKey,
        log_path: pathlib.Path,
        pid: int,
        resume: bool = False,
        engine: str = "",
    ) -> None:
        self.key = key
        self.container_id = container.id
        self.engine = engine  # the engine address, for the lease watchdog's `docker kill` ("" = default)
        self._container = container
        self._pid = pid
        self._stop_reason: str | None = None
        self._pump = LogPump(container, log_path, resume=resume)
        self.done: asyncio.Task[ExitStatus] = asyncio.create_task(self._watch(), name=f"docker-{key}")

    def pids(self) -> list[int]:
        """The container's init process as a host PID (its children are found through /proc)."""
        return [self._pid] if self._pid > 0 and not self.done.done() else []

    async def wait(self) -> ExitStatus:
        return await asyncio.shield(self.done)

    async def stop(self, grace_s: float, reason: str) -> None:
        if self.done.done():
            return
        self._stop_reason = self._stop_reason or reason
        try:
            await self._container.stop(t=max(0, math.ceil(grace_s)))
            await self._container.kill()  # "stop" returned: only a still-running container answers
        except DockerError as err:
            if err.status not in (304, 404, 409):  # already stopped / gone / not running
                raise
        await asyncio.wait({self.done})

    async def _watch(self) -> ExitStatus:
        pump = asyncio.create_task(self._pump.run())
        try:
            code = await self._wait_exit()
            stopped = self._stop_reason  # a stop asked for after the exit did not end the container
            oom = False
            if code is not None:
                try:
                    state = (await self._container.show()).get("State", {})
                    oom = bool(state.get("OOMKilled", False))
                except DockerError as err:
                    log.warning("%s: inspect after exit failed: %s", self.key, err)
            try:
                await asyncio.wait_for(asyncio.shield(pump), timeout=10.0)
            except TimeoutError:
                log.warning("%s: log stream did not end; closing it", self.key)
        finally:
            pump.cancel()
        await _remove(self._container)
        return self._status(code, oom, stopped)

    async def _wait_exit(self) -> int | None:
        delay = 0.2
        while True:
            try:
                result = await self._container.wait()
                return int(result.get("StatusCode", -1))
            except DockerError as err:
                if err.status == 404:
                    log.error("%s: container %s disappeared", self.key, self.container_id[:12])
                    return None
                log.warning("%s: waiting for the container failed (%s); retrying", self.key, err)
            except (TimeoutError, OSError) as err:  # the engine restarted or the socket broke
                log.warning("%s: engine connection lost while waiting (%s); retrying", self.key, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _status(self, code: int | None, oom: bool, stopped: str | None) -> ExitStatus:
        if stopped is not None:
            return ExitStatus(JobState.CANCELLED, code, stopped)
        if code is None:
            return ExitStatus(JobState.FAILED, None, "container disappeared")
        if code == 0:
            return ExitStatus(JobState.SUCCEEDED, 0, "exited with code 0")
        if oom:
            return ExitStatus(JobState.FAILED, code, f"killed: out of memory (exit code {code})")
        if 128 < code < 128 + signal.NSIG:
            with contextlib.suppress(ValueError):
                name = signal.Signals(code - 128).name
                return ExitStatus(JobState.FAILED, code, f"killed by signal {name} (exit code {code})")
        return ExitStatus(JobState.FAILED, code, f"exited with code {code}")


class DockerRuntime:
    """A :class:`worker.runtime.base.Runtime` on the Docker Engine; ``await DockerRuntime.open(...)``."""

    name = "docker"

    def __init__(
        self,
        docker: aiodocker.Docker,
        policy: ContainerPolicy,
        orphan_grace_s: float = 10.0,
        engine: str = "",
    ) -> None:
        self._docker = docker
        self.policy = policy
        self.engine = engine
        self._orphan_grace_s = orphan_grace_s
        self._attempts: dict[AttemptKey, DockerAttempt] = {}

    @classmethod
    async def open(
        cls,
        worker: str,
        *,
        url: str | None = None,
        allow_mounts: Sequence[str] = (),
        network: str = "none",
        gang_network: str = "host",
        readonly_rootfs: bool = False,
        pids_limit: int = 4096,
        orphan_grace_s: float = 10.0,
        nvidia: bool | None = None,
    ) -> DockerRuntime:
        """Connect to the engine (``url`` or $DOCKER_HOST or the default socket).

        ``nvidia``: give GPUs as DeviceRequests (True) or only through the NVIDIA_VISIBLE_DEVICES /
        CUDA_VISIBLE_DEVICES contract (False); None: DeviceRequests iff the engine has an ``nvidia``
        runtime. Raises :class:`Unavailable` if the engine does not answer, ValueError for options
        that cannot work (e.g. a gang network on which parts could not meet).
        """
        policy = ContainerPolicy(
            worker, tuple(allow_mounts), network, pids_limit, readonly_rootfs, gang_network=gang_network
        )
        try:
            docker = aiodocker.Docker(url=url)
        except (ValueError, OSError) as err:
            raise Unavailable(f"no Docker engine: {err}") from err
        try:
            info = await docker.system.info()
        except (DockerError, OSError) as err:
            await docker.close()
            raise Unavailable(f"the Docker engine does not answer: {err}") from err
        if nvidia is None:
            nvidia = "nvidia" in (info.get("Runtimes") or {})
        return cls(docker, dataclasses.replace(policy, nvidia=nvidia), orphan_grace_s, engine=url or "")

    async def start(self, request: LaunchRequest) -> DockerAttempt:
        if not request.spec.image:
            raise FailedPrecondition("the docker runtime needs a job image (spec.image is empty)")
        mounts = await asyncio.to_thread(check_mounts, request.spec.mounts, self.policy.allow_mounts)
        body = create_body(request, self.policy, mounts)
        await asyncio.to_thread(_prepare_files, request, body)
        name = container_name(self.policy.worker, request.key)
        try:
            container = await self._create(body, name)
        except FailedPrecondition as refused:
            cause = refused.__cause__
            if isinstance(cause, DockerError) and (clear := _missing_network(cause, request, body)):
                raise clear from cause
            raise
        try:
            await container.start()
            info = await container.show()
        except DockerError as err:
            await _remove(container)
            failed = FailedPrecondition(f"container {container.id[:12]} did not start: {err.message}")
            raise _missing_network(err, request, body) or failed from err
        pid = int(info.get("State", {}).get("Pid", 0))
        return self._track(DockerAttempt(container, request.key, request.log_path, pid, engine=self.engine))

    async def recover(self, log_dir: pathlib.Path) -> list[RunningAttempt]:
        """Re-attach to this worker's containers (running, or exited while the worker was down)."""
        found: list[RunningAttempt] = []
        for summary in await self._list():
            key = key_from_labels(summary.get("Labels") or {})
            if key is None or summary.get("State") not in _RECOVERABLE or key in self._attempts:
                continue
            container = self._docker.containers.container(summary["Id"])
            try:
                info = await container.show()
            except DockerError:
                continue
            log_path = _log_path(info, log_dir, key)
            pid = int(info.get("State", {}).get("Pid", 0))
            found.append(
                self._track(DockerAttempt(container, key, log_path, pid, resume=True, engine=self.engine))
            )
        return found

    async def remove_orphans(self, keep: set[AttemptKey]) -> list[AttemptKey]:
        doomed = [(key_from_labels(s.get("Labels") or {}), s["Id"]) for s in await self._list()]
        doomed = [(k, cid) for k, cid in doomed if k not in keep]
        await asyncio.gather(*(self._remove_orphan(k, cid) for k, cid in doomed))
        return [k for k, _ in doomed if k is not None]

    async def close(self) -> None:
        """Detach (containers keep running for the next life of this worker) and close the client."""
        attempts = list(self._attempts.values())
        for attempt in attempts:
            attempt.done.cancel()
        await asyncio.gather(*(a.done for a in attempts), return_exceptions=True)
        self._attempts.clear()
        await self._docker.close()

    def _track(self, attempt: DockerAttempt) -> DockerAttempt:
        self._attempts[attempt.key] = attempt
        attempt.done.add_done_callback(lambda _: self._forget(attempt))
        return attempt

    def _forget(self, attempt: DockerAttempt) -> None:
        if self._attempts.get(attempt.key) is attempt:
            del self._attempts[attempt.key]

    async def _create(self, body: dict[str, Any], name: str) -> DockerContainer:
        try:
            return await self._docker.containers.create(body, name=name)
        except DockerError as err:
            if err.status == 404 and "image" in err.message.lower():
                try:
                    await self._docker.images.pull(body["Image"])
                    return await self._docker.containers.create(body, name=name)
                except DockerError as pull_err:
                    image = body["Image"]
                    raise FailedPrecondition(
                        f"image {image} is not on this worker and cannot be pulled: {pull_err.message}"
                    ) from pull_err
            if err.status == 409:
                raise FailedPrecondition(f"container {name} already exists: {err.message}") from err
            raise FailedPrecondition(f"cannot create container {name}: {err.message}") from err

    async def _list(self) -> list[dict[str, Any]]:
        filters = json.dumps({"label": [f"{LABEL_WORKER}={self.policy.worker}"]})
        containers = await self._docker.containers.list(all=True, filters=filters)
        return [c._container for c in containers]

    async def _remove_orphan(self, key: AttemptKey | None, container_id: str) -> None:
        container = self._docker.containers.container(container_id)
        attempt = self._attempts.pop(key, None) if key is not None else None
        try:
            if attempt is not None:
                await attempt.stop(self._orphan_grace_s, "orphan: not wanted by the master")
            else:
                await container.stop(t=max(0, math.ceil(self._orphan_grace_s)))
        except DockerError as err:
            log.info("stopping orphan %s: %s", container_id[:12], err)
        await _remove(container)


def _missing_network(
    err: DockerError, request: LaunchRequest, body: dict[str, Any]
) -> FailedPrecondition | None:
    """A clear error when the container's network does not exist on this engine (older engines say
    so at start, newer ones at create), naming the worker option that chose it."""
    if err.status != 404 or "network" not in err.message.lower():
        return None
    network = body["HostConfig"]["NetworkMode"]
    option = "--docker-gang-network" if is_gang_part(request) else "--docker-network"
    return FailedPrecondition(
        f"network {network!r} ({option} of this worker) does not exist on its Docker engine: "
        f"create it with `docker network create` (an attachable overlay for gangs across hosts) "
        f"or change {option} ({err.message})"
    )


async def _remove(container: DockerContainer) -> None:
    try:
        await container.delete(force=True)
    except DockerError as err:
        if err.status not in (404, 409):  # gone already / removal in progress
            log.warning("removing container %s failed: %s", container.id[:12], err)


def _prepare_files(request: LaunchRequest, body: dict[str, Any]) -> None:
    """Blocking. The attempt's directory and every file a bind mount names must exist first."""
    request.log_path.parent.mkdir(parents=True, exist_ok=True)
    for mount in body["HostConfig"]["Mounts"]:
        source = pathlib.Path(mount["Source"])
        if mount["Target"].startswith(ATTEMPT_DIR + "/"):
            source.touch(exist_ok=True)


def _log_path(info: dict[str, Any], log_dir: pathlib.Path, key: AttemptKey) -> pathlib.Path:
    """The log file the attempt was started with, if it lies under ``log_dir``; else a default there."""
    labelled = (info.get("Config", {}).get("Labels") or {}).get(LABEL_LOG, "")
    if labelled:
        path = pathlib.Path(labelled)
        if path.is_relative_to(log_dir):
            return path
    return log_dir / key.job_id / f"{key.attempt}.log"


if TYPE_CHECKING:  # mypy checks that the classes keep to the runtime Protocols

    def _conforms(rt: DockerRuntime, attempt: DockerAttempt) -> tuple[Runtime, RunningAttempt]:
        return rt, attempt
