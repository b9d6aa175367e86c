"""Fixtures: the scripted OpenAI-compatible server (offline tests of the constrained mode)
and the real local llama-server (e2e tests; skipped only when the binary is not built)."""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from servers.provider_server import ProviderServer, RunningServer  # noqa: E402
from toolweave.local import LlamaServer, find_llama_server  # noqa: E402

FAKE_LLAMA = Path(__file__).resolve().parent / "fake_llama_server.py"


@pytest.fixture
def fake_binary(tmp_path: Path) -> Path:
    """A stand-in `llama-server` (tests/e2e/fake_llama_server.py): its command line, /health."""
    script = tmp_path / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LLAMA}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


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
