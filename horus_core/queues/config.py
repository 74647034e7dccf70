"""The queue configuration: queues with GPU quotas, priority classes, and its TOML parser.

A file looks like this (docs/queues.md explains every key)::

    half_life_s = 604800            # fair-share decay of attained GPU-time
    default_queue = "shared"        # for users no queue names (optional)

    [classes.low]
    level = 0
    [classes.normal]
    level = 100
    default = true
    [classes.high]
    level = 1000
    preempt = true                  # may preempt lower classes

    [queues.team-a]
    nominal = { v100 = 4, "*" = 2 } # guaranteed GPUs per type ("*": any type)
    borrowing_limit = 4             # GPUs it may use beyond its nominal quota
    users = ["alice", "bob"]        # who may submit ("*" or absent: anyone)
    weights = { alice = 2.0 }       # fair-share weight per user (default 1)

    [users]
    alice = "team-a"                # a user's default queue
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from horus_core.errors import InvalidArgument

ANY_TYPE = "*"
DEFAULT_HALF_LIFE_S = 7 * 86400.0
_FILE_KEYS = {"half_life_s", "default_queue", "classes", "queues", "users"}
_QUEUE_KEYS = {"nominal", "borrowing_limit", "users", "weights"}
_CLASS_KEYS = {"level", "preempt", "default"}
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Queue:
    """One queue: its guaranteed GPUs per type, how far it may borrow, and who may use it."""

    name: str
    nominal: Mapping[str, int]  # GPU type (or "*") -> guaranteed GPUs
    borrowing_limit: int = 0
    users: frozenset[str] = frozenset()  # empty: anyone
    weights: Mapping[str, float] = field(default_factory=dict)

    @property
    def nominal_total(self) -> int:
        return sum(self.nominal.values())

    def allows(self, user: str) -> bool:
        return not self.users or user in self.users

    def weight(self, user: str) -> float:
        return self.weights.get(user, 1.0)


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    level: int
    preempt: bool = False  # may preempt running jobs of lower classes


@dataclass(frozen=True, slots=True)
class QueueConfig:
    queues: Mapping[str, Queue]
    classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    default_class: str = ""
    user_queues: Mapping[str, str] = field(default_factory=dict)
    default_queue: str = ""
    half_life_s: float = DEFAULT_HALF_LIFE_S
    # user -> default queue: [users], else the first queue listing the user (built once)
    _defaults: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        defaults: dict[str, str] = {}
        for q in self.queues.values():
            for user in q.users:
                defaults.setdefault(user, q.name)
        object.__setattr__(self, "_defaults", {**defaults, **self.user_queues})

    def queue_of(self, user: str, asked: str = "") -> str:
        """The queue a job of ``user`` goes to: the one it names, else the user's default."""
        if asked:
            return asked
        hit = self._defaults.get(user)
        if hit is not None:
            return hit
        return self.default_queue or next(iter(self.queues), "")

    def level_of(self, class_name: str) -> int:
        pc = self.classes.get(class_name or self.default_class)
        return pc.level if pc else 0

    def may_preempt(self, class_name: str) -> bool:
        pc = self.classes.get(class_name or self.default_class)
        return pc.preempt if pc else False

    def check_job(self, user: str, queue: str, class_name: str) -> str:
        """The queue the job goes to; :class:`InvalidArgument` if it may not go anywhere."""
        name = self.queue_of(user, queue)
        if name not in self.queues:
            raise InvalidArgument("queue", f"unknown queue {name!r}; queues: {', '.join(self.queues)}")
        if not self.queues[name].allows(user):
            raise InvalidArgument("queue", f"user {user!r} may not submit to queue {name!r}")
        if class_name and class_name not in self.classes:
            known = ", ".join(self.classes) or "none configured"
            raise InvalidArgument(
                "priority_class", f"unknown priority class {class_name!r}; classes: {known}"
            )
        return name


def load_config(path: str) -> QueueConfig:
    """Read and check a TOML queue file; :class:`InvalidArgument` names what is wrong."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as e:
        raise InvalidArgument("queues", f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgument("queues", f"{path}: not valid TOML: {e}") from None
    return parse_config(raw)


def parse_config(raw: Mapping[str, object]) -> QueueConfig:
    _only(raw, _FILE_KEYS, "the file")
    queues = {name: _queue(name, body) for name, body in _table(raw, "queues").items()}
    if not queues:
        raise InvalidArgument("queues", "the file defines no [queues.NAME] table")
    classes = {name: _class(name, body) for name, body in _table(raw, "classes").items()}
    defaults = [
        n for n, body in _table(raw, "classes").items() if _get(_as_table(body, n), "default", bool, False)
    ]
    if len(defaults) > 1:
        raise InvalidArgument("classes", f"more than one default class: {', '.join(defaults)}")
    users = {str(u): _str(q, f"users.{u}") for u, q in _table(raw, "users").items()}
    default_queue = _get(raw, "default_queue", str, "")
    for where, q in [*((f"users.{u}", q) for u, q in users.items()), ("default_queue", default_queue)]:
        if q and q not in queues:
            raise InvalidArgument(where, f"names unknown queue {q!r}")
    half_life = float(_get(raw, "half_life_s", (int, float), DEFAULT_HALF_LIFE_S))
    if not math.isfinite(half_life) or half_life <= 0:
        raise InvalidArgument("half_life_s", "must be a positive number of seconds")
    return QueueConfig(queues, classes, defaults[0] if defaults else "", users, default_queue, half_life)


def _queue(name: str, body: object) -> Queue:
    where = f"queues.{name}"
    table = _as_table(body, where)
    _only(table, _QUEUE_KEYS, where)
    nominal = {str(t): _count(v, f"{where}.nominal.{t}") for t, v in _table(table, "nominal", where).items()}
    limit = _count(table.get("borrowing_limit", 0), f"{where}.borrowing_limit")
    users = _get(table, "users", list, [])
    if not all(isinstance(u, str) for u in users):
        raise InvalidArgument(f"{where}.users", "must be a list of user names")
    weights = {str(u): _weight(w, f"{where}.weights.{u}") for u, w in _table(table, "weights", where).items()}
    allowed = frozenset() if "*" in users else frozenset(users)
    return Queue(name, nominal, limit, allowed, weights)


def _class(name: str, body: object) -> PriorityClass:
    where = f"classes.{name}"
    table = _as_table(body, where)
    _only(table, _CLASS_KEYS, where)
    level = table.get("level")
    if not isinstance(level, int) or isinstance(level, bool):
        raise InvalidArgument(f"{where}.level", "must be an integer")
    return PriorityClass(name, level, _get(table, "preempt", bool, False))


def _table(raw: Mapping[str, object], key: str, where: str = "") -> Mapping[str, object]:
    return _as_table(raw.get(key, {}), f"{where}.{key}" if where else key)


def _as_table(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise InvalidArgument(where, "must be a table")
    return value


def _only(table: Mapping[str, object], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise InvalidArgument(where, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(keys))}")


def _get(table: Mapping[str, object], key: str, kind: type[T] | tuple[type, ...], default: T) -> T:
    value = table.get(key, default)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise InvalidArgument(key, f"has the wrong type ({type(value).__name__})")
    return value  # type: ignore[return-value]


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(where, "must be a string")
    return value


def _count(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(where, "must be a whole number of GPUs >= 0")
    return value


def _weight(value: object, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgument(where, "must be a positive number")
    return float(value)
