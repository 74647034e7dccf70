"""What ``--db`` names: a SQLite file (a path, or ``sqlite:///path``) or a PostgreSQL database
(``postgresql://user@host:port/db``); any other URL scheme is refused with a clear error."""

from __future__ import annotations

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
