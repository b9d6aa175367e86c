"""Shared test setup: the test servers in tests/servers are importable as `servers.*`."""

from __future__ import annotations

import faulthandler
import gc
import sys
from collections.abc import Iterator
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


_EXIT_GRACE_S = 300


def pytest_unconfigure(config: pytest.Config) -> None:
    """A run whose process does not exit within minutes of its summary (something left a
    thread or a child to wait for at interpreter exit) prints every thread's stack and exits
    1, rather than hanging until CI's time limit with nothing to show."""
    faulthandler.dump_traceback_later(_EXIT_GRACE_S, exit=True, file=sys.__stderr__)


# Tests that parse JSON nested to near the recursion limit, on purpose.
_DEEP_MODULES = frozenset(
    {
        "test_bedrock.py",
        "test_constrained_layer.py",
        "test_hostile_answers.py",
        "test_http_hardening.py",
        "test_properties.py",
        "test_arguments.py",
        "test_mcp_serve_malformed.py",
        "test_fuzz.py",
        "test_hardening_properties.py",
        "test_sse_properties.py",
        "test_eventstream_properties.py",
    }
)


@pytest.fixture(autouse=True)
def _finalise_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Before a test that recurses deep on purpose, collect what earlier tests left behind.
    Otherwise a collection may start deep inside that recursion and run those finalizers
    there, where they fail with RecursionError: unraisable exceptions that pytest (rightly)
    turns into a failure of an innocent test. (A collection before every test would cost
    a third of the suite's time.)"""
    if request.node.path.name in _DEEP_MODULES or "deep" in request.node.name:
        gc.collect()
    yield
