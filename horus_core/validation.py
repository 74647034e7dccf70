"""Validation of untrusted job specs and request ids. Every rule names the field it checks.

Sizes are counted in UTF-8 bytes, the unit of the wire and of ``execve``. The bounds keep every
accepted spec far below the 4 MiB gRPC message cap, so each message that carries it (the submit
answer, a listing page, the worker's Assignment) fits, and keep the command and environment within
what ``execve`` accepts, so a spec that passes validation can be started (docs/reliability.md,
"Input validation and the store").
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Sequence

from horus_core.caps import MAX_GPU_MEMORY_MIB
from horus_core.errors import InvalidArgument
from horus_core.model import NO_FLOOR, JobSpec
from horus_core.modelcard import MAX_CARD_BYTES, ModelCard, card_to_json, check_card

MAX_COMMAND_ARGS = 4096
# Linux: one argv or envp string may be at most MAX_ARG_STRLEN = 32 pages (128 KiB) with its NUL.
MAX_ARG_BYTES = 128 * 1024 - 1
# argv + envp as execve counts them (bytes + NUL + one pointer each). ARG_MAX is usually 2 MiB
# (a quarter of an 8 MiB stack); half of it is left for what the worker adds to the environment.
MAX_EXEC_BYTES = 1024 * 1024
MAX_SPEC_BYTES = 1024 * 1024 + 64 * 1024  # the whole spec as sent (an upper estimate)
MAX_NAME_LEN = 256  # bytes: name, owner, job_type
MAX_PATH_LEN = 4096  # bytes: workdir, each mount (PATH_MAX)
MAX_MOUNTS = 64
MAX_ENV = 256
MAX_ENV_VALUE = 8192
MAX_GPUS_PER_JOB = 64
MAX_PRIORITY = 1000
MAX_GRACE_S = 3600.0  # a job's SIGTERM -> SIGKILL grace
MAX_REQUEST_ID = 128
MIN_CPUS = 0.001
MAX_CPUS = 4096.0
MAX_GPU_TYPES = 16  # accepted GPU families per job
# a family key like "v100", "a10g", "h100", or a MIG profile like "h100-1g.10gb" (docs/sharing.md)
_GPU_TYPE = re.compile(r"^[a-z][a-z0-9_.-]{0,31}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Never let a user steer which GPUs or libraries a job sees: the runtime sets these, and a user's
# values are stripped (by the master on submit and again by every runtime).
RESERVED_ENV_PREFIXES = ("NVIDIA_", "HORUS_")
RESERVED_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "LD_PRELOAD"})


def is_reserved_env(key: str) -> bool:
    return key in RESERVED_ENV or key.startswith(RESERVED_ENV_PREFIXES)


def strip_reserved_env(env: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in env if not is_reserved_env(k))


def utf8_len(field: str, value: str) -> int:
    """The UTF-8 size of ``value``; a string that is not valid Unicode text is refused."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(field, "is not valid UTF-8 text") from None


def check_finite(field: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise InvalidArgument(field, f"must be a finite number, got {value}")


def check_request_id(request_id: str) -> str:
    if utf8_len("request_id", request_id) > MAX_REQUEST_ID:
        raise InvalidArgument("request_id", f"at most {MAX_REQUEST_ID} bytes")
    if _CONTROL.search(request_id):
        raise InvalidArgument("request_id", "contains a control character (NUL, newline, ...)")
    return request_id


def spec_size(spec: JobSpec) -> int:
    """An upper estimate of the spec's serialized size in bytes (each string + 8 of framing)."""
    strings = [*spec.command, *spec.mounts, spec.name, spec.owner, spec.job_type, spec.image, spec.workdir]
    strings += [s for kv in spec.env for s in kv]
    card = 0 if spec.model_card is None else len(card_to_json(spec.model_card)) + 8
    return 256 + card + sum(utf8_len("spec", s) + 8 for s in strings) + 8 * len(spec.env)


def exec_size(spec: JobSpec) -> int:
    """argv + envp as ``execve`` counts them: each string, its NUL and its pointer."""
    argv = sum(utf8_len("command", a) + 9 for a in spec.command)
    return argv + sum(utf8_len("env", k) + utf8_len("env", v) + 10 for k, v in spec.env)


def validate_spec(
    spec: JobSpec, *, max_gpus_per_node: int | None = None, allow_mounts: Sequence[str] | None = None
) -> JobSpec:
    """Return ``spec`` if it is acceptable, else raise :class:`InvalidArgument` naming the field.

    ``max_gpus_per_node`` is the largest node the cluster has (None: unknown, not checked).
    ``allow_mounts``: host path prefixes the operator allows (None: not checked here).
    """
    _check_command(spec.command)
    _check_gpus(spec.gpus)
    _check_elastic(spec)
    check_shape(spec, max_gpus_per_node)
    check_gpu_types(spec.gpu_types)
    for field_name in ("name", "owner", "job_type", "queue", "priority_class"):
        _check_text(field_name, getattr(spec, field_name), MAX_NAME_LEN)
    if spec.image and not _IMAGE.match(spec.image):
        raise InvalidArgument("image", f"not a valid image reference: {spec.image[:80]!r}")
    if spec.workdir:
        _check_path("workdir", spec.workdir)
    _check_env(spec.env)
    if not -MAX_PRIORITY <= spec.priority <= MAX_PRIORITY:
        raise InvalidArgument("priority", f"must be within ±{MAX_PRIORITY}")
    check_finite("cpus", spec.cpus)
    if not 0 <= spec.cpus <= MAX_CPUS:
        raise InvalidArgument("cpus", f"must be within [0, {MAX_CPUS:g}], got {spec.cpus}")
    if 0 < spec.cpus < MIN_CPUS:  # (Docker's finest CPU quota; smaller values would not read back)
        raise InvalidArgument("cpus", f"must be 0 (no limit) or at least {MIN_CPUS:g}, got {spec.cpus}")
    if spec.memory_mib < 0 or spec.total_steps < 0:
        raise InvalidArgument("resources", "memory_mib and total_steps must not be negative")
    _check_hints(spec)
    if spec.model_card is not None:
        _check_card(spec.model_card)
    check_gpu_memory(spec.gpu_memory_mib)
    check_min_speed(spec.min_speed, allow_none=True)
    check_grace(spec.grace_s)
    _check_mounts(spec.mounts, allow_mounts)
    if exec_size(spec) > MAX_EXEC_BYTES:
        raise InvalidArgument("command", f"command and env exceed {MAX_EXEC_BYTES} bytes (execve limit)")
    if spec_size(spec) > MAX_SPEC_BYTES:
        raise InvalidArgument("spec", f"larger than {MAX_SPEC_BYTES} bytes")
    return spec


def _check_gpus(gpus: int) -> None:
    if gpus < 1:
        raise InvalidArgument("gpus", f"must be at least 1, got {gpus}")
    if gpus > MAX_GPUS_PER_JOB:
        raise InvalidArgument("gpus", f"at most {MAX_GPUS_PER_JOB}, got {gpus}")


def check_shape(spec: JobSpec, max_gpus_per_node: int | None) -> None:
    """The multi-node shape: ``gpus_per_node`` and ``nodes`` (0 = any) split ``gpus`` evenly;
    the GPUs that must share one node fit on the largest node. An elastic job runs on one node,
    and so must fit there whole; a job without a shape may span nodes."""
    k, n = spec.gpus_per_node, spec.nodes
    if k < 0 or n < 0:
        raise InvalidArgument("gpus_per_node", f"gpus_per_node and nodes must not be negative, got {k}, {n}")
    if n > MAX_GPUS_PER_JOB:
        raise InvalidArgument("nodes", f"at most {MAX_GPUS_PER_JOB}, got {n}")
    if k and n and k * n != spec.gpus:
        raise InvalidArgument("gpus", f"gpus ({spec.gpus}) must equal gpus_per_node ({k}) x nodes ({n})")
    if (k or n) and spec.gpus % (k or n):
        what = f"gpus_per_node ({k})" if k else f"nodes ({n})"
        raise InvalidArgument("gpus", f"gpus ({spec.gpus}) must be a multiple of {what}")
    if (k or n) and spec.elastic:
        raise InvalidArgument("nodes", "an elastic job runs on one node: leave gpus_per_node and nodes at 0")
    local = k or (spec.gpus // n if n else 0) or (spec.gpu_range()[0] if spec.elastic else 0)
    if max_gpus_per_node is not None and local > max_gpus_per_node:
        raise InvalidArgument(
            "gpus", f"asks for {local} GPUs on one node but the largest node has {max_gpus_per_node}"
        )


def check_grace(value: float) -> None:
    """A job's stop grace: 0 (the default) up to MAX_GRACE_S seconds."""
    check_finite("grace_s", value)
    if not 0 <= value <= MAX_GRACE_S:
        raise InvalidArgument(
            "grace_s", f"must be within [0, {MAX_GRACE_S:g}] seconds (0: default), got {value:g}"
        )


def check_min_speed(value: float, *, allow_none: bool = False) -> None:
    """A speed floor (per job or the cluster default) is a finite number in [0, 1]; a job's may
    also be ``NO_FLOOR`` (-1: no floor at all, not even the cluster default)."""
    check_finite("min_speed", value)
    if allow_none and value == NO_FLOOR:
        return
    if not 0.0 <= value <= 1.0:
        none = ", or none for no floor at all (NO_FLOOR, -1, in the SDK)" if allow_none else ""
        raise InvalidArgument("min_speed", f"must be within [0, 1] (1.0 = solo speed{none}), got {value:g}")


def check_gpu_memory(mib: int) -> None:
    """A declared GPU memory cap: 0 (not declared) or a positive size up to 4 TiB (the master
    refuses one larger than every GPU it knows at submission)."""
    if not 0 <= mib <= MAX_GPU_MEMORY_MIB:
        raise InvalidArgument("gpu_memory", f"must be within [0, {MAX_GPU_MEMORY_MIB}] MiB, got {mib}")


def _check_elastic(spec: JobSpec) -> None:
    """An elastic range (both bounds 0: none) holds ``gpus``: 1 <= gpus_min <= gpus <= gpus_max
    <= MAX_GPUS_PER_JOB; ``gpus`` (so the minimum) must fit on the largest node, the maximum need
    not (the policy caps it to the node)."""
    lo, hi = spec.gpus_min, spec.gpus_max
    if lo == 0 and hi == 0:
        return
    if not 1 <= lo <= spec.gpus <= hi <= MAX_GPUS_PER_JOB:
        raise InvalidArgument(
            "gpus",
            f"an elastic range needs 1 <= gpus_min <= gpus <= gpus_max <= {MAX_GPUS_PER_JOB}, "
            f"got {lo} <= {spec.gpus} <= {hi}",
        )


def check_gpu_types(types: tuple[str, ...]) -> None:
    """Accepted GPU families: at most :data:`MAX_GPU_TYPES`, each a lowercase key like "v100",
    no duplicates."""
    if len(types) > MAX_GPU_TYPES:
        raise InvalidArgument("gpu_types", f"at most {MAX_GPU_TYPES} GPU types, got {len(types)}")
    for name in types:
        if not _GPU_TYPE.match(name):
            raise InvalidArgument(
                "gpu_types", f"{name[:40]!r} is not a GPU type; use lowercase families like v100, a100"
            )
    if len(set(types)) != len(types):
        raise InvalidArgument("gpu_types", "a GPU type is listed twice")


def _check_text(field: str, value: str, limit: int) -> None:
    if utf8_len(field, value) > limit:
        raise InvalidArgument(field, f"longer than {limit} bytes")
    if _CONTROL.search(value):
        raise InvalidArgument(field, "contains a control character (NUL, newline, ...)")


def _check_path(field: str, path: str) -> None:
    _check_text(field, path, MAX_PATH_LEN)
    if not path.startswith("/"):
        raise InvalidArgument(field, f"must be an absolute path, got {path[:80]!r}")


def _check_command(command: tuple[str, ...]) -> None:
    if not command or not command[0]:
        raise InvalidArgument("command", "must not be empty")
    if len(command) > MAX_COMMAND_ARGS:
        raise InvalidArgument("command", f"at most {MAX_COMMAND_ARGS} arguments")
    for arg in command:
        if utf8_len("command", arg) > MAX_ARG_BYTES:
            raise InvalidArgument("command", f"an argument is longer than {MAX_ARG_BYTES} bytes")
        if "\x00" in arg:
            raise InvalidArgument("command", "an argument contains a NUL character")


def _check_env(env: tuple[tuple[str, str], ...]) -> None:
    if len(env) > MAX_ENV:
        raise InvalidArgument("env", f"at most {MAX_ENV} variables")
    for key, value in env:
        if not _ENV_KEY.match(key):
            raise InvalidArgument("env", f"invalid variable name {key[:80]!r}")
        if utf8_len("env", value) > MAX_ENV_VALUE or "\x00" in value:
            raise InvalidArgument("env", f"value of {key} is over {MAX_ENV_VALUE} bytes or has a NUL")


def _check_hints(spec: JobSpec) -> None:
    h = spec.hints
    for name, value in (("util_avg", h.util_avg), ("util_peak", h.util_peak)):
        check_finite(f"hints.{name}", value)
        if value is not None and not 0.0 <= value <= 100.0:
            raise InvalidArgument(f"hints.{name}", f"must be a percentage in [0, 100], got {value}")
    if h.mem_mib is not None and not 0 <= h.mem_mib <= 1 << 22:
        raise InvalidArgument("hints.mem_mib", f"out of range: {h.mem_mib}")


def _check_card(card: ModelCard) -> None:
    check_card(card)
    size = len(card_to_json(card))
    if size > MAX_CARD_BYTES:
        raise InvalidArgument("model_card", f"larger than {MAX_CARD_BYTES} bytes ({size})")


def parse_mount(mount: str) -> tuple[str, str, bool]:
    """``/host:/container[:ro|:rw]`` -> (host, container, read_only), both paths checked."""
    _check_text("mounts", mount, MAX_PATH_LEN)
    parts = mount.split(":")
    if not (len(parts) == 2 or (len(parts) == 3 and parts[2] in ("ro", "rw"))):
        raise InvalidArgument("mounts", f"expected /host/path:/container/path[:ro], got {mount[:80]!r}")
    host, target = parts[0], parts[1]
    for path in (host, target):
        if not path.startswith("/") or ".." in path.split("/"):
            raise InvalidArgument("mounts", f"paths must be absolute, without '..': {mount[:80]!r}")
    return host, target, len(parts) == 3 and parts[2] == "ro"


def _check_mounts(mounts: tuple[str, ...], allow: Sequence[str] | None) -> None:
    if len(mounts) > MAX_MOUNTS:
        raise InvalidArgument("mounts", f"at most {MAX_MOUNTS} mounts")
    for mount in mounts:
        host = posixpath.normpath(parse_mount(mount)[0])
        if allow is not None and not any(_under(host, prefix) for prefix in allow):
            allowed = ", ".join(allow) or "none (horus-master --allow-mount PREFIX)"
            raise InvalidArgument("mounts", f"host path {host[:80]!r} is not allowed; allowed: {allowed}")


def _under(path: str, prefix: str) -> bool:
    base = posixpath.normpath(prefix)
    return path == base or path.startswith(base.rstrip("/") + "/")
