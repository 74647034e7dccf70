"""Project-level guards: generated code is fresh, import contracts hold, the public surface is pinned."""

from __future__ import annotations

import ast
import filecmp
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


def test_generated_code_is_fresh(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "gen"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
    )
    committed = ROOT / "horus_core" / "gen"
    fresh = sorted(p.name for p in out.iterdir())
    assert fresh == sorted(p.name for p in committed.iterdir() if p.suffix in (".py", ".pyi")), (
        "horus_core/gen has other files than the generator makes: run `make proto`"
    )
    cmp = filecmp.cmpfiles(out, committed, fresh, shallow=False)
    assert cmp[1] == [] and cmp[2] == [], f"stale generated code {cmp[1] + cmp[2]}: run `make proto`"


def test_import_contracts_hold() -> None:
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pure_core_imports_without_grpc() -> None:
    code = (
        "import sys; import horus_core.model, horus_core.policies, horus_core.validation;"
        "bad = [m for m in ('grpc', 'aiosqlite', 'pynvml', 'aiodocker') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_public_sdk_surface() -> None:
    import horus_core

    assert set(horus_core.__all__) == {"HorusClient", "SyncHorusClient", "__version__"}
    assert callable(horus_core.HorusClient.connect)


ORACLES = {"horus_core.packing._plain", "horus_core.policies._plain"}


def _imports(path: pathlib.Path) -> set[str]:
    """Modules ``path`` imports, absolute (``from x import y`` counts ``x`` and ``x.y``)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            )
            mod = ".".join(p for p in (base, node.module or "") if p)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_no_production_module_imports_the_plain_packing_oracle() -> None:
    """The per-job packing path is a test oracle: only tests and benches may import it."""
    offenders = []
    for top in ("horus_core", "master", "worker"):
        for path in (ROOT / top).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if name not in ORACLES and _imports(path) & ORACLES:
                offenders.append(name)
    assert offenders == []
    assert _imports(ROOT / "tests" / "core" / "test_policy_cache.py") & ORACLES  # the scan sees imports


def test_pyproject_reads_without_deprecation_warnings() -> None:
    """``pip install`` must not warn (a licence given as a TOML table is deprecated: SPDX text)."""
    code = (
        "from setuptools.config import pyprojecttoml; from setuptools.dist import Distribution;"
        "d = Distribution(); pyprojecttoml.apply_configuration(d, 'pyproject.toml');"
        "print(d.metadata.license_expression)"
    )
    argv = [sys.executable, "-W", "error", "-c", code]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "Apache-2.0"
