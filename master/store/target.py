"""What ``--db`` names: a SQLite file (a path, or ``sqlite:///path``) or a PostgreSQL database
(``postgresql://user@host:port/db``); any other URL scheme is refused with a clear error."""

from __future__ import annotations

import errno
import os
import pathlib
import re
from dataclasses import dataclass

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
PG_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class DbTarget:
    """``path`` for SQLite; ``url`` for PostgreSQL (then ``path`` is None)."""

    path: pathlib.Path | None = None
    url: str = ""

    @property
    def postgres(self) -> bool:
        return bool(self.url)

    def describe(self) -> str:
        """For logs: the URL without its password."""
        if not self.url:
            return str(self.path)
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", self.url)


def parse_db(text: str | pathlib.Path) -> DbTarget:
    """The database ``--db`` names; ValueError with the reason for a URL Horus cannot use."""
    if isinstance(text, pathlib.Path):
        return DbTarget(path=text)
    m = _SCHEME.match(text)
    if m is None:
        if not text.strip():
            raise ValueError("--db: empty; give a SQLite file or a postgresql:// URL")
        return DbTarget(path=pathlib.Path(text))
    scheme = m.group(1).lower()
    if scheme in PG_SCHEMES:
        if len(text) == len(m.group(0)):
            raise ValueError(f"--db: {text!r} names no server")
        return DbTarget(url=text)
    if scheme == "sqlite":
        rest = text[len(m.group(0)) :]
        if not rest:
            raise ValueError(f"--db: {text!r} names no file (sqlite:///path/to/horus.db)")
        return DbTarget(path=pathlib.Path(rest))
    raise ValueError(
        f"--db: unknown database URL scheme {scheme!r} in {text!r}; use a SQLite file path "
        "(or sqlite:///path) or postgresql://user@host:port/db"
    )


SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_file_problem(path: pathlib.Path) -> str | None:
    """Why the SQLite file ``path`` cannot be the store (one line naming it), None when it can:
    a folder, a file that is not a SQLite database, a folder that does not exist or where no file
    can be made. Checked before anything is opened; a file made to try is removed again."""
    if path.is_dir():
        return f"--db {path}: is a folder; give a database file in it (e.g. {path / 'horus.db'})"
    if path.exists():
        try:
            with path.open("rb") as f:
                head = f.read(len(SQLITE_HEADER))
        except OSError as exc:
            return f"--db {path}: cannot read it ({exc.strerror or exc})"
        if head and head != SQLITE_HEADER:
            return f"--db {path}: not a SQLite database (Horus leaves the file as it is)"
        return None
    parent = path.parent
    if not parent.is_dir():
        return f"--db {path}: no such folder {parent}"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        if exc.errno == errno.EEXIST:  # (made meanwhile: SQLite reads it)
            return None
        return f"--db {path}: cannot create it ({exc.strerror or exc})"
    os.close(fd)
    path.unlink()
    return None
