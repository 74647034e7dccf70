"""The Docker Engine create-container body for one attempt, with Horus's hardened defaults.

Pure functions (no engine, no I/O except resolving mount paths, which the caller does in a thread):
the body grants exactly the scheduled GPUs, no privileges, no host namespaces, no capabilities,
no host paths except under an operator allow-list.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from horus_core.errors import InvalidArgument, PermissionDenied
from horus_core.progress import PROGRESS_ENV, SPEED_ENV
from horus_core.validation import strip_reserved_env
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker_gang import (
    check_gang_network,
    is_gang_part,
    networking_config,
    rendezvous_rewrites,
)

LABEL_JOB = "horus.job_id"
LABEL_ATTEMPT = "horus.attempt"
LABEL_WORKER = "horus.worker"
LABEL_LOG = "horus.log_path"
_MIB = 1 << 20
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_FORBIDDEN_NETWORKS = ("host",)
ATTEMPT_DIR = "/horus"  # where a container sees its attempt's files (progress, speed, log)


class MountNotAllowed(PermissionDenied):
    """A job asked for a host path the operator has not allow-listed; the attempt fails."""


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    """What the operator allows containers on this worker (``horus-worker --allow-mount ...``)."""

    worker: str
    allow_mounts: tuple[str, ...] = ()  # host path prefixes, e.g. "/data"
    network: str = "none"  # a Docker network name; never "host" or another container's
    pids_limit: int = 4096
    readonly_rootfs: bool = False
    shm_mib: int = 1024  # PyTorch data loaders need more than Docker's 64 MiB default
    nvidia: bool = False  # the engine has the `nvidia` runtime: use DeviceRequests
    log_max_size: str = "100m"
    # The parts of a multi-node gang must reach each other: their containers join this network,
    # host networking by default (the one exception to ``network``'s rule, docs/gangs.md); on a
    # named network they meet at the rank-0 container's alias (worker.runtime.docker_gang).
    gang_network: str = "host"

    def __post_init__(self) -> None:
        if self.network in _FORBIDDEN_NETWORKS or self.network.startswith("container:"):
            raise ValueError(f"network {self.network!r} would share a host or container namespace")
        check_gang_network(self.gang_network)
        if self.pids_limit <= 0:
            raise ValueError("pids_limit must be positive")
        for prefix in self.allow_mounts:
            if not prefix.startswith("/") or not os.path.normpath(prefix).strip("/"):
                raise ValueError(f"--allow-mount needs an absolute path other than /, got {prefix!r}")


def container_name(worker: str, key: AttemptKey) -> str:
    return _NAME_BAD.sub("_", f"horus-{worker}-{key.job_id}-{key.attempt}")[:200]


def labels(worker: str, key: AttemptKey, log_path: str) -> dict[str, str]:
    return {LABEL_JOB: key.job_id, LABEL_ATTEMPT: str(key.attempt), LABEL_WORKER: worker, LABEL_LOG: log_path}


def key_from_labels(found: dict[str, str]) -> AttemptKey | None:
    try:
        return AttemptKey(found[LABEL_JOB], int(found[LABEL_ATTEMPT]))
    except (KeyError, ValueError):
        return None


def attempt_files(request: LaunchRequest) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Mounts and env rewrites that show the container its progress and speed files.

    The attempt's directory (the log file's) is mounted read-only at ``/horus``, so the speed file
    the worker replaces atomically stays current; the progress file is mounted writable on top.
    Only files inside that directory are shown; the runtime creates the progress file first.
    """
    base = request.log_path.parent
    env = dict(request.env)
    mounts: list[dict[str, Any]] = []
    rewrites: dict[str, str] = {}
    for key, writable in ((PROGRESS_ENV, True), (SPEED_ENV, False)):
        path = pathlib.Path(env.get(key, ""))
        if not path.is_absolute() or not path.is_relative_to(base) or path == base:
            continue
        rewrites[key] = f"{ATTEMPT_DIR}/{path.relative_to(base).as_posix()}"
        if writable:
            mounts.append(_bind(str(path), rewrites[key], read_only=False))
    if rewrites:
        mounts.insert(0, _bind(str(base), ATTEMPT_DIR, read_only=True))
    return mounts, rewrites


def _bind(source: str, target: str, read_only: bool) -> dict[str, Any]:
    return {"Type": "bind", "Source": source, "Target": target, "ReadOnly": read_only}


def environment(request: LaunchRequest, nvidia: bool, rewrites: dict[str, str] | None = None) -> list[str]:
    """User env (reserved keys stripped), then the worker's additions, then the GPU contract."""
    env = dict(strip_reserved_env(request.spec.env))
    env.update(request.env)
    env.update(rewrites or {})
    visible = ",".join(request.gpu_uuids)
    # Always set both: CUDA images ship NVIDIA_VISIBLE_DEVICES=all, which an engine whose default
    # runtime is nvidia would honour; "void" exposes no GPU at all.
    env["NVIDIA_VISIBLE_DEVICES"] = visible or "void"
    env["CUDA_VISIBLE_DEVICES"] = visible
    if nvidia:
        env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
    return [f"{k}={v}" for k, v in env.items()]


def parse_mount(mount: str) -> tuple[str, str, bool]:
    """``/host:/container[:ro|:rw]`` -> (host, container, read_only)."""
    parts = mount.split(":")
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        host, target, read_only = parts[0], parts[1], parts[2] == "ro"
    elif len(parts) == 2:
        host, target, read_only = parts[0], parts[1], False
    else:
        raise InvalidArgument("mounts", f"expected /host/path:/container/path[:ro], got {mount[:80]!r}")
    if not host.startswith("/") or not target.startswith("/"):
        raise InvalidArgument("mounts", f"both paths must be absolute, got {mount[:80]!r}")
    return host, target, read_only


def check_mounts(mounts: Sequence[str], allow: Sequence[str], resolve: bool = True) -> list[dict[str, Any]]:
    """The Engine ``Mounts`` for a job, or :class:`MountNotAllowed` naming the first refused path.

    The host path is resolved (symlinks, ``..``) before it is compared, component by component, with
    the allow-listed prefixes. Blocking (realpath): call from a thread.
    """
    out: list[dict[str, Any]] = []
    for mount in mounts:
        host, target, read_only = parse_mount(mount)
        real = os.path.realpath(host) if resolve else os.path.normpath(host)
        if not any(_under(real, prefix, resolve) for prefix in allow):
            allowed = ", ".join(allow) or "none: this worker allows no host mounts"
            raise MountNotAllowed(f"mount {host} not allowed (allowed host prefixes: {allowed})")
        if target == ATTEMPT_DIR or target.startswith(ATTEMPT_DIR + "/"):
            raise InvalidArgument("mounts", f"{ATTEMPT_DIR} is reserved for the worker's files")
        out.append(_bind(real, target, read_only))
    return out


def _under(path: str, prefix: str, resolve: bool) -> bool:
    base = os.path.realpath(prefix) if resolve else os.path.normpath(prefix)
    return path == base or path.startswith(base.rstrip("/") + "/")


def create_body(
    request: LaunchRequest, policy: ContainerPolicy, mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The JSON body of ``POST /containers/create``; ``mounts`` are the checked user mounts."""
    spec = request.spec
    own_mounts, rewrites = attempt_files(request)
    rewrites |= rendezvous_rewrites(request, policy.gang_network)
    host: dict[str, Any] = {
        "Privileged": False,
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "PidsLimit": policy.pids_limit,
        "NetworkMode": policy.gang_network if is_gang_part(request) else policy.network,
        "IpcMode": "private",
        "PidMode": "",
        "UTSMode": "",
        "UsernsMode": "",
        "ReadonlyRootfs": policy.readonly_rootfs,
        "ShmSize": policy.shm_mib * _MIB,
        "Mounts": own_mounts + [_bind(h, c, ro) for h, c, ro in request.binds] + mounts,
        "RestartPolicy": {"Name": "no"},
        "AutoRemove": False,  # removed by the runtime once the final status is read
        "LogConfig": {"Type": "json-file", "Config": {"max-size": policy.log_max_size, "max-file": "3"}},
    }
    if policy.readonly_rootfs:
        host["Tmpfs"] = {"/tmp": "rw,nosuid,nodev,size=1g"}
    if spec.cpus > 0:
        host["NanoCpus"] = int(spec.cpus * 1e9)
    if spec.memory_mib > 0:
        host["Memory"] = host["MemorySwap"] = spec.memory_mib * _MIB
    if policy.nvidia and request.gpu_uuids:
        host["DeviceRequests"] = [
            {"Driver": "nvidia", "DeviceIDs": list(request.gpu_uuids), "Capabilities": [["gpu"]]}
        ]
    body: dict[str, Any] = {
        "Image": spec.image,
        "Cmd": list(spec.command),
        "Env": environment(request, policy.nvidia, rewrites),
        "Labels": labels(policy.worker, request.key, str(request.log_path)),
        "HostConfig": host,
        "AttachStdin": False,
        "OpenStdin": False,
        "Tty": False,
    }
    if spec.workdir:
        body["WorkingDir"] = spec.workdir
    if (networks := networking_config(request, policy.gang_network)) is not None:
        body["NetworkingConfig"] = networks
    return body
