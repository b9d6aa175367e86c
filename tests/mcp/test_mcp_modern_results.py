"""A 2026-07-28 server whose results carry no ``resultType`` (nor, on listings, ``ttlMs`` /
``cacheScope``): the client reads them as the spec says (absent means "complete"), rather
than refusing them as the SDK's strict result check does. Hand-written servers in real
subprocesses (tests/servers/mcp_raw_stdio_server.py, mcp_raw_http_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp_support import SERVERS, TEST_TIMEOUT, ServerProcess, start_server, stdio_config

from toolweave.mcp import McpClient, McpServerConfig

RAW = str(SERVERS / "mcp_raw_stdio_server.py")
RAW_HTTP = str(SERVERS / "mcp_raw_http_server.py")


async def test_a_result_without_result_type_from_a_2026_07_28_server_is_read() -> None:
    config = stdio_config(RAW, "modern", name="raw", call_timeout=30, protocol="newest")
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        assert await tools["big"].ainvoke({"size": 3}) == "xxx"
        result = await client.call_tool("big", {"size": 2})
        assert result.result_type == "complete" and not result.is_error
        assert client._core._conn is not None and client._core._conn.modern


@pytest.fixture
def modern_http() -> Iterator[ServerProcess]:
    server = start_server([RAW_HTTP, "modern"])
    yield server
    server.stop()


async def test_a_result_without_result_type_over_streamable_http_is_read(
    modern_http: ServerProcess,
) -> None:
    config = McpServerConfig(
        server_name="raw-http",
        params={"url": f"http://127.0.0.1:{modern_http.port}/mcp"},
        protocol="newest",
        call_timeout=30,
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        assert await tools["big"].ainvoke({"size": 4}) == "xxxx"
        assert client._core._conn is not None and client._core._conn.modern
