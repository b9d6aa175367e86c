"""toolweave's stdio transport (mcp/_stdio_transport.py) against a hand-written server that
sends what a well-behaved one never would: a result of tens of megabytes on one line, a
line over `max_message_bytes`, a lone surrogate escape; and a server that ignores its
stdin closing and SIGTERM, with a child of its own. A real subprocess each time."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from mcp_support import SERVERS, start_server, stdio_config

from toolweave.errors import McpError
from toolweave.mcp import McpClient, McpServerConfig

RAW = str(SERVERS / "mcp_raw_stdio_server.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


async def test_a_fifty_megabyte_result_arrives_whole() -> None:
    # The SDK's reader joined its buffer with every chunk: a minute for 50 MB on a quiet
    # machine. call_timeout is a hang guard only.
    size = 50_000_000
    async with McpClient(stdio_config(RAW, name="raw", call_timeout=30)) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        text = await tools["big"].ainvoke({"size": size})
    assert len(text) == size and set(text) == {"x"}


async def test_a_message_over_max_message_bytes_fails_its_call_and_the_next_call_works() -> None:
    config = stdio_config(RAW, name="raw", call_timeout=30, max_message_bytes=1_000_000)
    async with McpClient(config) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        with pytest.raises(McpError) as caught:
            await tools["big"].ainvoke({"size": 3_000_000})
        assert "max_message_bytes" in str(caught.value)
        assert await tools["big"].ainvoke({"size": 999_000}) == "x" * 999_000


async def test_a_lone_surrogate_from_the_server_becomes_u_fffd() -> None:
    async with McpClient(stdio_config(RAW, name="raw", call_timeout=30)) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        assert await tools["surrogate"].ainvoke({}) == "a\ufffdb"


async def test_a_server_ignoring_stdin_and_sigterm_is_killed_with_its_child() -> None:
    async with McpClient(stdio_config(RAW, "stubborn", name="raw", call_timeout=30)) as client:
        tools = {t.card.name: t for t in await client.list_tools()}
        server, child = map(int, (await tools["family"].ainvoke({})).split())
        assert _alive(server) and _alive(child)
    deadline = time.monotonic() + 30  # a hang guard: the kill comes after about 4 s
    while (_alive(server) or _alive(child)) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    assert not _alive(server) and not _alive(child)


async def test_an_http_event_over_the_sdks_default_limit_arrives_and_ours_is_named() -> None:
    # The SDK refuses server-sent events over 1 MiB by default; max_message_bytes (64 MiB)
    # applies to streamable HTTP too, and a refusal says which limit it was.
    server = start_server([str(SERVERS / "mcp_raw_http_server.py")])
    try:
        url = f"http://127.0.0.1:{server.port}/mcp"
        config = McpServerConfig(server_name="raw", params={"url": url}, call_timeout=30)
        async with McpClient(config) as client:
            tools = {t.card.name: t for t in await client.list_tools()}
            assert await tools["big"].ainvoke({"size": 3_000_000}) == "x" * 3_000_000
        small = config.model_copy(update={"max_message_bytes": 1_000_000})
        async with McpClient(small) as client:
            tools = {t.card.name: t for t in await client.list_tools()}
            with pytest.raises(McpError, match="1000000 byte limit"):
                await tools["big"].ainvoke({"size": 2_000_000})
    finally:
        server.stop()
