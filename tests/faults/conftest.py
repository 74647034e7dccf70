"""The long sweep runs only when asked for with ``-m slow``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="the repeated fault sweep runs with -m slow")
    for item in items:
        if "test_fault_sweep" in item.nodeid:
            item.add_marker(skip)
