"""Project-level guards: generated code is fresh, import contracts hold, the public surface is pinned."""

from __future__ import annotations

import filecmp
import os
import pathlib
import subprocess
import sys
import tomllib

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


def test_the_policy_core_keeps_its_structure_rules() -> None:
    """scripts/check_structure.py (also in ``make check``): examples and docs import no private
    module, no long function in policies/packing, no new cache in policies, no larger closure."""
    script = ROOT / "scripts" / "check_structure.py"
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("kept: ") == 6, result.stdout


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


def test_the_test_helpers_contract_covers_every_product_module() -> None:
    """The oracles and test helpers live in ``horus_core.testing``; an import contract keeps every
    other module of the package (and the daemons) off it: a new module must be named there too."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("forbidden_modules") == ["horus_core.testing"]]
    product = {
        f"horus_core.{p.stem}"
        for p in (ROOT / "horus_core").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem not in ("__init__", "testing")
    }
    assert set(contract["source_modules"]) == product | {"master", "worker"}


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


def test_an_editable_install_prints_no_setuptools_warning(tmp_path: pathlib.Path) -> None:
    """``make``'s install (``pip install -e .``) into a fresh environment: no warning box from the
    build backend (issue 39), and the installed package is the working tree's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-e", str(ROOT)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    said = done.stdout + done.stderr
    for word in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "SetuptoolsWarning", "!!"):
        assert word not in said, said[-3000:]
    where = subprocess.run(
        [str(python), "-c", "import horus_core, master, worker; print(horus_core.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert where.stdout.strip() == str(ROOT / "horus_core" / "__init__.py")
