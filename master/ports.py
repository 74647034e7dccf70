"""The addresses ``horus-master`` listens on: read from its flags as HOST:PORT, and whether they
are free, asked of the OS before the daemon opens its database or gRPC binds (gRPC's own failure
prints a raw C-core log line first): a taken port is one clean line and exit 1, nothing changed."""

from __future__ import annotations

import argparse
import socket

from horus_core.address import with_port


def listen_addresses(args: argparse.Namespace) -> None:
    """``--listen`` (the default port where none is given), ``--advertise`` (the port of
    ``--listen`` where it names none) and the HTTP listeners (a port required), rewritten as
    HOST:PORT in ``args``; ValueError names the flag and what is wrong."""
    flag = "--listen"
    try:
        args.listen = with_port(args.listen, allow_zero=True)
        port = int(args.listen.rsplit(":", 1)[1])
        flag = "--advertise"
        if args.advertise:
            args.advertise = with_port(args.advertise, port or None)
        for flag in ("--http-listen", "--metrics-listen"):
            key = flag[2:].replace("-", "_")
            if getattr(args, key):
                setattr(args, key, with_port(getattr(args, key), None, allow_zero=True))
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


def check_free(listen: str) -> None:
    """Raise OSError ``cannot listen on HOST:PORT: Address already in use`` (or why else the
    address cannot be bound); port 0 is always free. The check binds and closes at once, with
    SO_REUSEADDR as the servers use, so a port in TIME_WAIT counts as free."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                raise OSError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
