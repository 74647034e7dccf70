"""Job files: a job described in YAML (SkyPilot / dstack field names) <-> :class:`JobSpec`.

Pure: parses text and formats text, nothing else. Every error names the field and its line.
The mapping is the table :data:`FIELDS`: one row per YAML path, so a new field is one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from horus_core.caps import parse_size
from horus_core.errors import InvalidArgument
from horus_core.gpurange import format_gpus, parse_gpus
from horus_core.model import NO_FLOOR, JobSpec, ProfileHints
from horus_core.modelcard import ModelCard, card_from_dict, card_to_dict
from horus_core.validation import validate_spec

SHELL = ("sh", "-c")  # a ``run:`` string runs through the shell, as in SkyPilot and dstack
_ACCEL = re.compile(
    r"^(?:(?P<type>[A-Za-z][A-Za-z0-9_-]*(?:,[A-Za-z][A-Za-z0-9_-]*)*):)?(?P<count>[0-9]+(?:-[0-9]+)?)$"
)


@dataclass(frozen=True)
class JobFile:
    """A parsed job file: the spec, and warnings about what it asked that Horus cannot honour."""

    spec: JobSpec
    warnings: tuple[str, ...] = ()


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}"


def _bad(path: str, node: yaml.Node, message: str) -> InvalidArgument:
    return InvalidArgument(path, f"{message} ({_where(node)})")


def _scalar(path: str, node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise _bad(path, node, "expected a single value")
    return str(node.value)


def _text(path: str, node: yaml.Node) -> str:
    value = _scalar(path, node)
    if node.tag == "tag:yaml.org,2002:null":
        return ""
    return value


def _int(path: str, node: yaml.Node) -> int:
    value = _scalar(path, node)
    try:
        return int(value)
    except ValueError:
        raise _bad(path, node, f"expected an integer, got {value!r}") from None


def _float(path: str, node: yaml.Node) -> float:
    value = _scalar(path, node)
    try:
        return float(value)
    except ValueError:
        raise _bad(path, node, f"expected a number, got {value!r}") from None


def _floor(path: str, node: yaml.Node) -> float:
    """A speed floor, or ``none`` (no floor at all: NO_FLOOR)."""
    if _scalar(path, node).strip().lower() == "none":
        return NO_FLOOR
    return _float(path, node)


def _size(path: str, node: yaml.Node) -> int:
    """A memory size in MiB: ``12GiB``, ``512MiB``, ``4096`` (MiB)."""
    try:
        return parse_size(_scalar(path, node))
    except ValueError as exc:
        raise _bad(path, node, str(exc)) from None


def _bool(path: str, node: yaml.Node) -> bool:
    value = _scalar(path, node).lower()
    if value in ("true", "yes", "on"):
        return True
    if value in ("false", "no", "off"):
        return False
    raise _bad(path, node, f"expected true or false, got {value!r}")


def _strings(path: str, node: yaml.Node) -> tuple[str, ...]:
    if not isinstance(node, yaml.SequenceNode):
        raise _bad(path, node, "expected a list")
    return tuple(_scalar(path, item) for item in node.value)


def _command(path: str, node: yaml.Node) -> tuple[str, ...]:
    """``run: "python train.py"`` (through the shell) or ``run: [python, train.py]`` (argv as is)."""
    if isinstance(node, yaml.SequenceNode):
        return _strings(path, node)
    script = _scalar(path, node)
    return (*SHELL, script) if script.strip() else ()


def _card(path: str, node: yaml.Node) -> ModelCard:
    """``model:`` holds a model card (the JSON of ``hctl describe``, as YAML or inline JSON)."""
    if not isinstance(node, yaml.MappingNode):
        raise _bad(path, node, "expected the model card: a mapping like hctl describe prints")
    raw = yaml.SafeLoader("").construct_document(node)
    try:
        return card_from_dict(raw)
    except InvalidArgument as exc:
        raise _bad(f"{path}.{exc.field.removeprefix('model_card.')}", node, exc.message) from None


def _envs(path: str, node: yaml.Node) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, yaml.MappingNode):
        raise _bad(path, node, "expected a mapping NAME: value")
    return tuple((_scalar(path, k), _text(f"{path}.{k.value}", v)) for k, v in node.value)


# --------------------------------------------------------------------------- the mapping table

Parse = Callable[[str, yaml.Node], Any]


@dataclass(frozen=True)
class Field:
    """One YAML path -> one JobSpec attribute (``hints.x`` for a hint); ``parse`` reads the node.
    ``attr`` None: known but not supported yet (rejected with a clear message)."""

    parse: Parse
    attr: str | None


FIELDS: dict[str, Field] = {
    "name": Field(_text, "name"),
    "resources.accelerators": Field(lambda p, n: n, "gpus"),  # see _accelerators
    "resources.gpu_memory": Field(_size, "gpu_memory_mib"),  # a cap per GPU (docs/sharing.md)
    "num_nodes": Field(_int, None),  # nodes; accelerators then counts per node (see load)
    "envs": Field(_envs, "env"),
    "image": Field(_text, "image"),
    "run": Field(_command, "command"),
    "workdir": Field(_text, "workdir"),
    "job_type": Field(_text, "job_type"),
    "exclusive": Field(_bool, "exclusive"),
    "priority": Field(_int, "priority"),
    "hints.util_avg": Field(_float, "hints.util_avg"),
    "hints.util_peak": Field(_float, "hints.util_peak"),
    "hints.mem_mib": Field(_int, "hints.mem_mib"),
    "cpus": Field(_float, "cpus"),
    "memory_mib": Field(_int, "memory_mib"),
    "mounts": Field(_strings, "mounts"),
    "total_steps": Field(_int, "total_steps"),
    "min_speed": Field(_floor, "min_speed"),
    "queue": Field(_text, "queue"),
    "priority_class": Field(_text, "priority_class"),
    "grace_s": Field(_float, "grace_s"),
    "model": Field(lambda p, n: _card(p, n), "model_card"),  # the card, as hctl describe writes it
}
_SECTIONS = {"resources", "hints"}


def _flatten(node: yaml.MappingNode, prefix: str = "") -> list[tuple[str, yaml.Node, yaml.Node]]:
    """(dotted path, key node, value node) of every leaf the table knows, nested sections opened."""
    out: list[tuple[str, yaml.Node, yaml.Node]] = []
    seen: set[str] = set()
    for key, value in node.value:
        name = _scalar("(key)", key)
        path = f"{prefix}{name}"
        if path in seen:
            raise _bad(path, key, "given twice")
        seen.add(path)
        if not prefix and name in _SECTIONS:
            if not isinstance(value, yaml.MappingNode):
                raise _bad(path, value, "expected a mapping")
            out.extend(_flatten(value, f"{path}."))
        elif path in FIELDS:
            out.append((path, key, value))
        else:
            raise _bad(path, key, f"unknown field{_did_you_mean(path)}")
    return out


def _did_you_mean(path: str) -> str:
    """`` (did you mean `resources.accelerators`?)`` for a misspelt field: the closest known name
    in the same section, else anywhere (``accelerators`` at the top is ``resources.accelerators``)."""
    section, _, leaf = path.rpartition(".")
    names = [*FIELDS, *_SECTIONS]
    for pool in ([n for n in names if n.rpartition(".")[0] == section], names):
        by_leaf: dict[str, str] = {}
        for name in pool:
            by_leaf.setdefault(name.rpartition(".")[2], name)
        close = difflib.get_close_matches(leaf, list(by_leaf), n=1, cutoff=0.7)
        if close:
            return f" (did you mean `{by_leaf[close[0]]}`?)"
    return ""


def _accelerators(node: yaml.Node) -> tuple[tuple[int, int, int], tuple[str, ...]]:
    """``COUNT`` or ``TYPE:COUNT`` -> ((gpus, gpus_min, gpus_max), gpu_types); ``TYPE`` may list
    several (``V100,A100:2``) and ``COUNT`` may be an elastic range ``MIN-MAX`` (``V100:2-8``)."""
    path = "resources.accelerators"
    text = _scalar(path, node).strip()
    match = _ACCEL.match(text)
    if match is None:
        raise _bad(path, node, f"expected COUNT, TYPE:COUNT or TYPE:MIN-MAX like V100:2-8, got {text!r}")
    types = tuple(t.strip().lower() for t in match["type"].split(",")) if match["type"] else ()
    try:
        return parse_gpus(match["count"], path), types
    except InvalidArgument as exc:
        raise _bad(path, node, exc.message) from None


def _value(path: str, key: yaml.Node, value: yaml.Node, warnings: list[str]) -> Any:
    field = FIELDS[path]
    if path == "num_nodes":
        n = _int(path, value)
        if n < 1:
            raise _bad(path, value, f"at least 1 node, got {n}")
        return n
    if field.attr is None:
        raise _bad(path, key, "not supported yet")
    if path == "resources.accelerators":
        return _accelerators(value)
    return field.parse(path, value)


def load(text: str, *, max_gpus_per_node: int | None = None) -> JobFile:
    """Parse one job file. Raises :class:`InvalidArgument` naming the field (and line) at fault."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InvalidArgument("job file", f"not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(root, yaml.MappingNode):
        raise InvalidArgument("job file", "expected a mapping of fields (name:, run:, ...) at the top")
    warnings: list[str] = []
    values: dict[str, Any] = {}
    hints: dict[str, Any] = {}
    for path, key, node in _flatten(root):
        attr = FIELDS[path].attr
        value = _value(path, key, node, warnings)
        if path == "num_nodes":
            values["nodes"] = value
            continue
        if attr is None:
            continue
        if path == "resources.accelerators":
            (values["gpus"], values["gpus_min"], values["gpus_max"]), values["gpu_types"] = value
        elif attr.startswith("hints."):
            hints[attr.removeprefix("hints.")] = value
        else:
            values[attr] = value
    if "command" not in values:
        raise InvalidArgument("run", "missing: the command to run (run: python train.py)")
    if "nodes" in values:  # accelerators count per node, as launchers read it
        values["gpus_per_node"] = values.get("gpus", 1)
        values["gpus"] = values["gpus_per_node"] * values["nodes"]
    spec = JobSpec(**values, hints=ProfileHints(**hints))
    return JobFile(validate_spec(spec, max_gpus_per_node=max_gpus_per_node), tuple(warnings))


# --------------------------------------------------------------------------- back to YAML


def to_dict(spec: JobSpec) -> dict[str, Any]:
    """The job file of ``spec`` as plain data (defaults left out; the owner is the master's)."""
    default = JobSpec(command=("x",))
    out: dict[str, Any] = {}
    if spec.name:
        out["name"] = spec.name
    types = ",".join(t.upper() for t in spec.gpu_types)
    nodes = spec.nodes or (spec.gpus // spec.gpus_per_node if spec.gpus_per_node else 0)
    per_node = spec.gpus // nodes if nodes else spec.gpus  # per node when the shape is set
    count: int | str = format_gpus(spec, "-") if spec.elastic else per_node
    out["resources"] = {"accelerators": f"{types}:{count}" if types else count}
    if spec.gpu_memory_mib:
        out["resources"]["gpu_memory"] = f"{spec.gpu_memory_mib}MiB"
    if nodes:
        out["num_nodes"] = nodes
    if spec.image:
        out["image"] = spec.image
    if spec.workdir:
        out["workdir"] = spec.workdir
    if spec.env:
        out["envs"] = dict(spec.env)
    is_shell = len(spec.command) == 3 and spec.command[:2] == SHELL
    out["run"] = spec.command[2] if is_shell else list(spec.command)
    for attr in (
        "job_type",
        "exclusive",
        "priority",
        "cpus",
        "memory_mib",
        "total_steps",
        "min_speed",
        "queue",
        "priority_class",
        "grace_s",
    ):
        if getattr(spec, attr) != getattr(default, attr):
            out[attr] = getattr(spec, attr)
    if spec.mounts:
        out["mounts"] = list(spec.mounts)
    if spec.min_speed == NO_FLOOR:
        out["min_speed"] = "none"
    hints = {k: v for k, v in dataclasses.asdict(spec.hints).items() if v is not None}
    if hints:
        out["hints"] = hints
    if spec.model_card is not None:
        out["model"] = card_to_dict(spec.model_card)
    return out


def dump(spec: JobSpec) -> str:
    """YAML that :func:`load` turns back into ``spec`` (apart from the owner)."""
    return yaml.safe_dump(to_dict(spec), sort_keys=False, allow_unicode=True, default_flow_style=False)
