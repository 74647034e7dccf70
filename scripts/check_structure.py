"""The policy core's structure rules (issue 40), checked by ``make check``.

- examples/ and docs/ import no ``_private`` module (a new policy needs only the public API,
  ``horus_core.policies.api``);
- no function of ``horus_core/policies`` or ``horus_core/packing`` over 60 lines, but the Numba
  kernels (decorated with a ``jit``);
- no module of ``horus_core/policies`` keeps a cache of its own (a ``functools`` cache, or a
  name saying ``cache`` / ``memo``) beyond those listed in ``CACHES_LEFT``;
- the import closure inside policies/packing of ``fifo``, ``binpack`` and ``horus`` (the
  modules their files import, and theirs, by the import statements) stays within a ceiling:
  today's sizes, which only go down; issue 40's targets are printed beside them.

Prints one line per rule; exits 1 where one is broken.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ("horus_core.policies", "horus_core.packing")
MAX_LINES = 60
# policy -> (the ceiling today, issue 40's target)
CLOSURES = {"fifo": (6, 6), "binpack": (15, 15), "horus": (15, 25)}
# The caches a policies module still keeps (remaining work of issue 40: into the pass's frame).
CACHES_LEFT = {"horus_core/policies/gputypes.py": 1}
_PRIVATE = re.compile(r"^\s*(?:from\s+(\S+)\s+import\s+([^\n#]+)|import\s+(\S+))", re.M)
_CACHE = re.compile(r"\b(lru_cache|functools\.cache|@cache\b|\w*_cache\b|\w*_memo\b)")


def private_imports() -> list[str]:
    """``file: module`` for each import of a ``_private`` horus module in examples/ and docs/."""
    bad = []
    files = [*sorted((ROOT / "examples").glob("*.py")), *sorted((ROOT / "docs").glob("*.md"))]
    for path in files:
        for m in _PRIVATE.finditer(path.read_text(encoding="utf-8")):
            module = m.group(1) or m.group(3)
            names = [n.strip() for n in (m.group(2) or "").split(",")]
            if module.startswith("horus") and (
                any(p.startswith("_") for p in module.split(".")) or any(n.startswith("_") for n in names)
            ):
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0).strip()}")
    return bad


def long_functions() -> list[str]:
    """``file:line name (n lines)`` for each function over MAX_LINES lines, Numba kernels aside."""
    bad = []
    for path in _core_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                kernel = any("jit" in ast.unparse(d) for d in node.decorator_list)
                if lines > MAX_LINES and not kernel:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return bad


def caches() -> list[str]:
    """``file: n`` for each policies module with more cache names than CACHES_LEFT allows."""
    bad = []
    for path in sorted((ROOT / "horus_core" / "policies").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        names = {m.group(1) for m in _CACHE.finditer(_code_only(path))}
        if len(names) > CACHES_LEFT.get(rel, 0):
            bad.append(f"{rel}: {sorted(names)}")
    return bad


def closure(policy: str) -> set[str]:
    """The modules of policies/packing that ``horus_core.policies.<policy>`` imports, and theirs."""
    seen: set[str] = set()
    todo = [f"horus_core.policies.{policy}"]
    while todo:
        module = todo.pop()
        if module in seen or not module.startswith(SCOPE) or _path(module) is None:
            continue
        seen.add(module)
        todo += _imports(module)
    return seen


def main() -> int:
    broken = 0
    for rule, bad in (
        ("examples and docs import no _private module", private_imports()),
        (f"no function over {MAX_LINES} lines in policies/packing (Numba kernels aside)", long_functions()),
        ("no policies module keeps a cache of its own (beyond CACHES_LEFT)", caches()),
    ):
        broken += bool(bad)
        print(f"{'BROKEN' if bad else 'kept'}: {rule}" + "".join(f"\n    {b}" for b in bad))
    for policy, (ceiling, target) in CLOSURES.items():
        n = len(closure(policy))
        broken += n > ceiling
        state = "BROKEN" if n > ceiling else "kept"
        print(f"{state}: import closure of {policy}: {n} modules (ceiling {ceiling}; issue 40: {target})")
    return 1 if broken else 0


def _core_files() -> Iterator[Path]:
    for package in ("policies", "packing"):
        yield from sorted((ROOT / "horus_core" / package).rglob("*.py"))


def _code_only(path: Path) -> str:
    """The file without its comments and docstrings' words (names in code only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            first.value.value = ""
    return ast.unparse(tree)


def _path(module: str) -> Path | None:
    p = ROOT.joinpath(*module.split("."))
    if (p / "__init__.py").exists():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").exists() else None


def _imports(module: str) -> list[str]:
    path = _path(module)
    assert path is not None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out += [f"{base}.{a.name}" if _path(f"{base}.{a.name}") else base for a in node.names]
    return out


if __name__ == "__main__":
    sys.exit(main())
