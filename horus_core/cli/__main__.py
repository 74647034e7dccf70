"""``python -m horus_core.cli``: the same as ``hctl``."""

from horus_core.cli.main import main

raise SystemExit(main())
