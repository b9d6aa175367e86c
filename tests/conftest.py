"""Shared test setup: the test servers in tests/servers are importable as `servers.*`."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import pytest  # noqa: E402

_DURABLE = Path(_TESTS) / "durable"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what starts heavy servers, so `-m "not local_model and not durable"` skips it:
    `local_model` for tests that use the real llama-server, `durable` for those that start
    PostgreSQL (tests/durable)."""
    for item in items:
        if "llama_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.local_model)
        if item.path.is_relative_to(_DURABLE):
            item.add_marker(pytest.mark.durable)
