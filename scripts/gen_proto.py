"""Regenerate horus_core/gen from proto/ (run: python scripts/gen_proto.py [--check DIR])."""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import sys

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"


def generate(out: pathlib.Path) -> None:
    tmp = out / "_tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    include = str(pathlib.Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{include}",
        f"--python_out={tmp}",
        f"--grpc_python_out={tmp}",
        f"--mypy_out={tmp}",
        f"--mypy_grpc_out={tmp}",
        *files,
    ]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")
    # Flatten horus/v1/*.py into gen/ and make imports package-relative.
    for path in sorted((tmp / "horus" / "v1").iterdir()):
        text = path.read_text()
        text = re.sub(r"^from horus\.v1 import (\w+)", r"from horus_core.gen import \1", text, flags=re.M)
        text = re.sub(r"^import horus\.v1\.(\w+)", r"import horus_core.gen.\1", text, flags=re.M)
        text = text.replace("horus.v1.types_pb2", "horus_core.gen.types_pb2")
        (out / path.name).write_text(text)
    shutil.rmtree(tmp)
    (out / "__init__.py").write_text('"""Generated from proto/ by scripts/gen_proto.py. Do not edit."""\n')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "horus_core" / "gen"))
    ns = parser.parse_args()
    out = pathlib.Path(ns.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    generate(out)


if __name__ == "__main__":
    main()
