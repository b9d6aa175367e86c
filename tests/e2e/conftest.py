"""Fixtures: the scripted OpenAI-compatible server (offline tests of the constrained mode)
and the real local llama-server (e2e tests; skipped only when the binary is not built)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from servers.provider_server import ProviderServer, RunningServer  # noqa: E402
from toolweave.local import LlamaServer, find_llama_server  # noqa: E402


@pytest.fixture(scope="session")
def _scripted() -> Iterator[RunningServer]:
    running = RunningServer()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def scripted(_scripted: RunningServer) -> Iterator[ProviderServer]:
    """The scripted server, emptied before and after each test."""
    state = _scripted.state
    state.reset()
    yield state
    state.reset()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """The real llama-server with SmolLM2, started once for the session, always stopped."""
    binary = find_llama_server()
    if binary is None:
        pytest.skip(
            "llama-server is not built: run `python -m toolweave.local build` "
            "(scripts/ensure-llama-server.sh; ~10 min once, cached) to run the e2e tests"
        )
    server = LlamaServer(binary, startup_timeout=120)
    server.start()
    try:
        yield server
    finally:
        server.stop()
