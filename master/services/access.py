"""Who is calling and what they may see (DESIGN §6): users see their own jobs, admins all."""

from __future__ import annotations

from dataclasses import dataclass

from horus_core.errors import PermissionDenied
from horus_core.model import Job

ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    admin: bool = False


def owner_for(caller: Identity | None, requested: str) -> str:
    """With auth on the owner is the caller; without it, whatever the spec says."""
    if caller is not None:
        return caller.user
    return requested or ANONYMOUS


def owner_filter(caller: Identity | None, requested: str) -> str | None:
    """The owner a listing is restricted to (None: everyone's jobs)."""
    if caller is not None and not caller.admin:
        if requested and requested != caller.user:
            raise PermissionDenied(f"user {caller.user} may only list their own jobs")
        return caller.user
    return requested or None


def check_job_access(caller: Identity | None, job: Job) -> None:
    if caller is not None and not caller.admin and job.spec.owner != caller.user:
        raise PermissionDenied(f"job {job.id} belongs to another user")
