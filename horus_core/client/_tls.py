"""Channel credentials from PEM files: TLS to the master, or mutual TLS with a client certificate."""

from __future__ import annotations

import pathlib

import grpc

from horus_core.errors import InvalidArgument


def tls_credentials(
    ca: pathlib.Path | str, cert: pathlib.Path | str | None = None, key: pathlib.Path | str | None = None
) -> grpc.ChannelCredentials:
    """Trust the master's certificate through ``ca``; present ``cert``/``key`` for mutual TLS."""
    if (cert is None) != (key is None):
        raise InvalidArgument("tls", "a client certificate and its key go together")
    try:
        root = pathlib.Path(ca).read_bytes()
        chain = pathlib.Path(cert).read_bytes() if cert is not None else None
        private = pathlib.Path(key).read_bytes() if key is not None else None
    except OSError as exc:
        raise InvalidArgument("tls", f"cannot read {exc.filename}: {exc.strerror}") from None
    return grpc.ssl_channel_credentials(root, private, chain)
