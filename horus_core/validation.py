"""Validation of untrusted job specs. Every rule names the field it checks."""

from __future__ import annotations

import re

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec

MAX_COMMAND_ARGS = 1024
MAX_ARG_LEN = 8192
MAX_NAME_LEN = 256
MAX_ENV = 256
MAX_ENV_VALUE = 8192
MAX_GPUS_PER_JOB = 64
MAX_PRIORITY = 1000
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")
# Never let a user steer which GPUs or libraries a job sees: the runtime sets these, and a user's
# values are stripped (by the master on submit and again by every runtime).
RESERVED_ENV_PREFIXES = ("NVIDIA_", "HORUS_")
RESERVED_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "LD_PRELOAD"})


def is_reserved_env(key: str) -> bool:
    return key in RESERVED_ENV or key.startswith(RESERVED_ENV_PREFIXES)


def strip_reserved_env(env: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in env if not is_reserved_env(k))


def validate_spec(spec: JobSpec, *, max_gpus_per_node: int | None = None) -> JobSpec:
    """Return ``spec`` if it is acceptable, else raise :class:`InvalidArgument` naming the field.

    ``max_gpus_per_node`` is the largest node the cluster has (None: unknown, not checked).
    """
    _check_command(spec.command)
    if spec.gpus < 1:
        raise InvalidArgument("gpus", f"must be at least 1, got {spec.gpus}")
    if spec.gpus > MAX_GPUS_PER_JOB:
        raise InvalidArgument("gpus", f"at most {MAX_GPUS_PER_JOB}, got {spec.gpus}")
    if max_gpus_per_node is not None and spec.gpus > max_gpus_per_node:
        raise InvalidArgument(
            "gpus",
            f"asks for {spec.gpus} GPUs but the largest node has {max_gpus_per_node}",
        )
    for field_name in ("name", "owner", "job_type", "workdir"):
        value = getattr(spec, field_name)
        if len(value) > MAX_NAME_LEN:
            raise InvalidArgument(field_name, f"longer than {MAX_NAME_LEN} characters")
        if "\x00" in value:
            raise InvalidArgument(field_name, "contains a NUL character")
    if spec.image and not _IMAGE.match(spec.image):
        raise InvalidArgument("image", f"not a valid image reference: {spec.image[:80]!r}")
    _check_env(spec.env)
    if not -MAX_PRIORITY <= spec.priority <= MAX_PRIORITY:
        raise InvalidArgument("priority", f"must be within ±{MAX_PRIORITY}")
    if spec.cpus < 0 or spec.memory_mib < 0 or spec.total_steps < 0:
        raise InvalidArgument("resources", "cpus, memory_mib and total_steps must not be negative")
    _check_hints(spec)
    for mount in spec.mounts:
        if len(mount) > MAX_ARG_LEN or ":" not in mount or not mount.startswith("/"):
            raise InvalidArgument("mounts", f"expected /host/path:/container/path[:ro], got {mount[:80]!r}")
    return spec


def _check_command(command: tuple[str, ...]) -> None:
    if not command or not command[0]:
        raise InvalidArgument("command", "must not be empty")
    if len(command) > MAX_COMMAND_ARGS:
        raise InvalidArgument("command", f"at most {MAX_COMMAND_ARGS} arguments")
    for arg in command:
        if len(arg) > MAX_ARG_LEN:
            raise InvalidArgument("command", f"an argument is longer than {MAX_ARG_LEN} characters")
        if "\x00" in arg:
            raise InvalidArgument("command", "an argument contains a NUL character")


def _check_env(env: tuple[tuple[str, str], ...]) -> None:
    if len(env) > MAX_ENV:
        raise InvalidArgument("env", f"at most {MAX_ENV} variables")
    for key, value in env:
        if not _ENV_KEY.match(key):
            raise InvalidArgument("env", f"invalid variable name {key[:80]!r}")
        if len(value) > MAX_ENV_VALUE or "\x00" in value:
            raise InvalidArgument("env", f"value of {key} is too long or contains NUL")


def _check_hints(spec: JobSpec) -> None:
    h = spec.hints
    for name, value in (("util_avg", h.util_avg), ("util_peak", h.util_peak)):
        if value is not None and not 0.0 <= value <= 100.0:
            raise InvalidArgument(f"hints.{name}", f"must be a percentage in [0, 100], got {value}")
    if h.mem_mib is not None and not 0 <= h.mem_mib <= 1 << 22:
        raise InvalidArgument("hints.mem_mib", f"out of range: {h.mem_mib}")
