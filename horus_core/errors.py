"""The HorusError tree. Mapped to gRPC status codes in one place: :mod:`horus_core.wire`."""

from __future__ import annotations


class HorusError(Exception):
    """Base of every error Horus raises on purpose."""


class InvalidArgument(HorusError):
    """Bad input; nothing was changed. ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFound(HorusError):
    pass


class AlreadyExists(HorusError):
    pass


class FailedPrecondition(HorusError):
    """The request is valid but the object's state forbids it (e.g. cancel a finished job)."""


class PermissionDenied(HorusError):
    pass


class Unauthenticated(HorusError):
    pass


class Unavailable(HorusError):
    """The master (or a worker) cannot be reached or is shutting down."""


class HorusWarning(UserWarning):
    """What the master says about an accepted request that may not do what was meant (an
    unknown job type, a GPU type no node has): the SDK raises it with :func:`warnings.warn`."""
