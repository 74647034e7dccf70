"""Addresses as people write them (``host``, ``host:port``, ``[v6]:port``, lists of masters): one
parser for hctl, the SDK, the worker and the master's own flags, with the documented default
port of the master's API (50051) where none is given. Pure: no sockets, no name lookups."""

from __future__ import annotations

import re

DEFAULT_PORT = 50051  # the master's API (horus-master --listen's default, where hctl looks)
_HOST = re.compile(r"^[A-Za-z0-9._-]{1,253}$")  # a host name or an IPv4 address
_V6 = re.compile(r"^[0-9A-Fa-f:.%A-Za-z]{2,}$")  # the inside of [...]: an IPv6 address (zone allowed)
_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:")  # gRPC target syntax, kept


def with_port(text: str, default_port: int | None = DEFAULT_PORT, *, allow_zero: bool = False) -> str:
    """``text`` as ``HOST:PORT``: ``localhost`` -> ``localhost:50051``, ``::1`` -> ``[::1]:50051``,
    a gRPC URI (``dns:///h:1``, ``unix:/path``) as it is. ``default_port`` None: a port is required.
    Raises ValueError naming what is wrong (no host, a port that is not a number or out of range)."""
    s = text.strip()
    if not s:
        raise ValueError("an empty address (expected HOST:PORT)")
    if s.lower().startswith(_SCHEMES):
        return s
    host, port = _split(s)
    if not host:
        raise ValueError(f"no host in {s!r} (expected HOST:PORT, e.g. 127.0.0.1:{DEFAULT_PORT})")
    if port is None:
        if default_port is None:
            raise ValueError(f"no port in {s!r} (expected HOST:PORT, e.g. {host}:8080)")
        port = str(default_port)
    if not port.isdigit() or not (0 if allow_zero else 1) <= int(port) <= 65535:
        low = 0 if allow_zero else 1
        raise ValueError(f"port {port!r} of {s!r} is not a number within {low}-65535")
    return f"{host}:{int(port)}"


def _split(s: str) -> tuple[str, str | None]:
    """(host, port or None); the host keeps its brackets for IPv6."""
    if s.startswith("["):
        inside, sep, rest = s[1:].partition("]")
        if not sep or not _V6.match(inside):
            raise ValueError(f"{s!r} is not an address (an IPv6 one is written [::1]:{DEFAULT_PORT})")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{s!r}: expected ':PORT' after ']'")
        return f"[{inside}]", (rest[1:] if rest else None)
    if s.count(":") > 1:  # a bare IPv6 address: its port (if any) needs brackets
        if not _V6.match(s):
            raise ValueError(f"{s!r} is not an address")
        return f"[{s}]", None
    host, sep, port = s.partition(":")
    if host and not _HOST.match(host):
        raise ValueError(f"{host!r} is not a host name or address")
    if sep and not port:
        raise ValueError(f"no port after ':' in {s!r}")
    return host, (port if sep else None)


def split_addresses(text: str, default_port: int | None = DEFAULT_PORT) -> tuple[str, ...]:
    """``"a, b:2"`` -> ``("a:50051", "b:2")`` (several masters, docs/ha.md); at least one."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"no master address in {text!r}")
    return tuple(dict.fromkeys(with_port(p, default_port) for p in parts))
