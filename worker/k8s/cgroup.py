"""Which pod a host process belongs to, from its ``/proc/<pid>/cgroup`` (the kubelet's pod cgroup).

The kubelet puts every container of a pod under one pod cgroup, named after the pod's UID, in
one of two layouts (the *cgroup driver*), on cgroup v1 (one line per controller hierarchy,
``ID:controllers:path``) or v2 (one line, ``0::path``):

- cgroupfs: ``/kubepods/pod<uid>/<container>`` (Guaranteed) or
  ``/kubepods/burstable|besteffort/pod<uid>/<container>``;
- systemd: ``/kubepods.slice/kubepods-pod<uid_>.slice/...`` or
  ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/<runtime>-<id>.scope``,
  where ``uid_`` is the UID with ``-`` written ``_`` (systemd's unit-name escaping).

A static pod's cgroup carries its config hash (32 hex digits) instead of a UUID; the API shows
that hash in the mirror pod's ``kubernetes.io/config.hash`` annotation. Paths seen from another
cgroup namespace start with ``/..``; only the ``kubepods`` part matters. Parsing is pure;
:class:`PodResolver` does the (blocking) reads, bounded, for one pass.
"""

from __future__ import annotations

import pathlib
import re

MAX_CGROUP_BYTES = 64 * 1024  # a real file is a few hundred bytes; bounds a racing or odd /proc
_UUID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
# cgroupfs: a path segment "pod<uid>" anywhere below a "kubepods" segment
_CGROUPFS = re.compile(rf"/kubepods(?:/[^/\n]+)*?/pod(?P<uid>{_UUID})(?:/|$)")
# systemd: a slice "[prefix-]kubepods[-qos]-pod<uid_>.slice" (kind's nodes add "kubelet-")
_SYSTEMD = re.compile(rf"/(?:[^/\n]*-)?kubepods(?:-[a-z]+)?-pod(?P<uid>{_UUID})\.slice(?:/|$)")


def pod_uid_of_path(path: str) -> str | None:
    """The pod UID in one cgroup path (``-`` restored), or None if the path is no pod's."""
    path = path.lower()
    match = _SYSTEMD.search(path) or _CGROUPFS.search(path)
    return match.group("uid").replace("_", "-") if match else None


def pod_uid_of_cgroup(text: str) -> str | None:
    """The pod UID a ``/proc/<pid>/cgroup`` file names, or None (not in a pod). On cgroup v1 the
    hierarchies agree for a pod's process; the first line that names a pod wins."""
    for line in text.splitlines():
        _, sep, rest = line.partition(":")
        _, sep2, path = rest.partition(":")
        if not sep or not sep2:
            continue
        uid = pod_uid_of_path(path)
        if uid is not None:
            return uid
    return None


class PodResolver:
    """PID -> pod UID for one pass over ``<proc_root>/<pid>/cgroup`` (cached: call from a thread)."""

    def __init__(self, proc_root: pathlib.Path = pathlib.Path("/proc")) -> None:
        self._root = proc_root
        self._seen: dict[int, str | None] = {}

    def pod_of(self, pid: int) -> str | None:
        if pid not in self._seen:
            self._seen[pid] = pod_uid_of_cgroup(self._read(pid)) if pid > 0 else None
        return self._seen[pid]

    def _read(self, pid: int) -> str:
        try:
            with open(self._root / str(pid) / "cgroup", "rb") as fh:
                return fh.read(MAX_CGROUP_BYTES).decode("utf-8", errors="replace")
        except OSError:  # gone, or not ours to read
            return ""
