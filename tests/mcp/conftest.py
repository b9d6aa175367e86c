"""Fixtures for the MCP tests: real servers over stdio and HTTP (127.0.0.1, free port)."""

from __future__ import annotations

import faulthandler
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import DEMO, TEST_TIMEOUT, ServerProcess, start_server, stdio_config

from toolweave.mcp import McpServerConfig


@pytest.fixture(autouse=True)
def _hang_guard() -> Iterator[None]:
    """Last resort: dump every thread and exit if a test hangs."""
    faulthandler.dump_traceback_later(TEST_TIMEOUT + 60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    d = tmp_path / "markers"
    d.mkdir()
    return d


@pytest.fixture
def demo_config(marker_dir: Path) -> McpServerConfig:
    return stdio_config(DEMO, env={"MCP_MARKER_DIR": str(marker_dir)})


@pytest.fixture
def demo_http(marker_dir: Path) -> Iterator[ServerProcess]:
    server = start_server([DEMO, "streamable-http"], env={"MCP_MARKER_DIR": str(marker_dir)})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def demo_http_config(demo_http: ServerProcess) -> McpServerConfig:
    return McpServerConfig(
        server_name="demo",
        client_type="streamable-http",
        params={"url": f"http://127.0.0.1:{demo_http.port}/mcp"},
        connect_timeout=30,
    )
