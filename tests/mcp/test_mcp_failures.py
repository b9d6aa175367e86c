"""Broken servers: crashes, invalid JSON-RPC, silence, death mid-call, restarts.

Every case must end in a clear `McpError`, never a hang (each test runs under a timeout).
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import (
    BROKEN,
    DEMO,
    TEST_TIMEOUT,
    ServerProcess,
    file_appears,
    free_port,
    start_server,
    stdio_config,
)

from toolweave import ErrorCode, McpError
from toolweave.callbacks import CallbackFramework
from toolweave.callbacks.events import ToolCallEvents as E
from toolweave.mcp import McpClient, McpServerConfig, SyncMcpClient


async def test_server_crashing_at_start() -> None:
    cfg = stdio_config(BROKEN, "crash", name="crashy")
    async with asyncio.timeout(TEST_TIMEOUT):
        with pytest.raises(McpError) as info:
            async with McpClient(cfg):
                pass
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "crashy" in info.value.message and "could not connect" in info.value.message


async def test_command_not_found() -> None:
    cfg = McpServerConfig(
        server_name="ghost", params={"command": "/nonexistent/toolweave-mcp-server"}
    )
    async with asyncio.timeout(TEST_TIMEOUT):
        with pytest.raises(McpError) as info:
            await McpClient(cfg).connect()
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "nonexistent" in info.value.message


async def test_server_writing_invalid_json_rpc() -> None:
    # Fails at once, not after connect_timeout.
    cfg = stdio_config(BROKEN, "garbage", name="garbage", connect_timeout=60)
    async with asyncio.timeout(30):
        with pytest.raises(McpError) as info:
            async with McpClient(cfg):
                pass
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "not valid JSON-RPC" in info.value.message


async def test_silent_server_hits_connect_timeout() -> None:
    cfg = stdio_config(BROKEN, "silent", name="silent", connect_timeout=1.0)
    async with asyncio.timeout(TEST_TIMEOUT):
        with pytest.raises(McpError) as info:
            async with McpClient(cfg):
                pass
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "connect timeout" in info.value.message


def test_sync_client_connect_failure() -> None:
    with pytest.raises(McpError, match="could not connect"):
        SyncMcpClient(stdio_config(BROKEN, "crash")).connect()


async def test_http_nothing_listening() -> None:
    cfg = McpServerConfig(
        server_name="nobody",
        params={"url": f"http://127.0.0.1:{free_port()}/mcp"},
        connect_timeout=10,
    )
    async with asyncio.timeout(TEST_TIMEOUT):
        with pytest.raises(McpError) as info:
            async with McpClient(cfg):
                pass
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "nobody" in info.value.message


async def test_http_server_answering_invalid_json() -> None:
    server = start_server([BROKEN, "http-garbage"])
    try:
        cfg = McpServerConfig(
            server_name="bad-http",
            params={"url": f"http://127.0.0.1:{server.port}/mcp"},
            connect_timeout=10,
        )
        async with asyncio.timeout(TEST_TIMEOUT):
            with pytest.raises(McpError) as info:
                async with McpClient(cfg):
                    pass
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    finally:
        server.stop()


async def test_stdio_server_dies_mid_call_then_reconnects(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = {t.name: t for t in await client.list_tools()}
        first_pid = await tools["pid"].ainvoke({})
        with pytest.raises(McpError) as info:
            await tools["die"].ainvoke({"after": 0.2})
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
        assert "during call to tool 'die'" in info.value.message
        assert "not retried" in info.value.message
        # The next call starts a new server process.
        assert await tools["add"].ainvoke({"a": 1, "b": 1}) == "2"
        assert await tools["pid"].ainvoke({}) != first_pid


async def test_stdio_server_dies_between_calls(demo_config: McpServerConfig) -> None:
    import os
    import signal

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = {t.name: t for t in await client.list_tools()}
        pid = int(await tools["pid"].ainvoke({}))
        os.kill(pid, signal.SIGKILL)
        # The death may or may not be noticed before the next call is sent: either that call
        # fails clearly, or it already reconnects. By the second call it must work.
        try:
            assert await tools["add"].ainvoke({"a": 2, "b": 2}) == "4"
        except McpError as e:
            assert e.code == ErrorCode.MCP_CONNECTION_ERROR
        assert await tools["add"].ainvoke({"a": 2, "b": 3}) == "5"
        assert int(await tools["pid"].ainvoke({})) != pid


async def test_reconnect_gives_up_after_bounded_attempts(tmp_path: Path) -> None:
    # A server that works once: the launcher script refuses to start a second time.
    flag = tmp_path / "started"
    launcher = tmp_path / "once.py"
    launcher.write_text(
        "import pathlib, runpy, sys\n"
        f"flag = pathlib.Path({str(flag)!r})\n"
        "if flag.exists():\n"
        "    sys.exit(5)\n"
        "flag.write_text('1')\n"
        f"sys.argv = [{DEMO!r}]\n"
        f"runpy.run_path({DEMO!r}, run_name='__main__')\n"
    )
    cfg = stdio_config(str(launcher), name="once", max_reconnect_attempts=2)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(McpError):
            await tools["die"].ainvoke({})
        with pytest.raises(McpError) as info:
            await tools["add"].ainvoke({"a": 1, "b": 1})
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
        assert "could not connect" in info.value.message


# --- streamable HTTP --------------------------------------------------------------------------------


async def test_http_server_dies_mid_call_then_comes_back(
    demo_http: ServerProcess, demo_http_config: McpServerConfig
) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_http_config) as client:
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(McpError) as info:
            await tools["die"].ainvoke({"after": 0.2})
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
        # While it is down, calls fail clearly (bounded reconnect attempts)...
        with pytest.raises(McpError) as info:
            await tools["add"].ainvoke({"a": 1, "b": 1})
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
        # ...and once it is back, the next call reconnects.
        await asyncio.to_thread(demo_http.restart)
        assert await tools["add"].ainvoke({"a": 1, "b": 1}) == "2"


async def test_http_server_restart_between_calls_is_transparent(
    demo_http: ServerProcess, demo_http_config: McpServerConfig
) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_http_config) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["add"].ainvoke({"a": 1, "b": 2}) == "3"
        await asyncio.to_thread(demo_http.restart)
        # The new server process does not know the old session (or connection); either way
        # the request never ran, so it is sent again on a new connection.
        for _ in range(2):
            try:
                assert await tools["add"].ainvoke({"a": 3, "b": 4}) == "7"
                break
            except McpError as e:
                assert e.code == ErrorCode.MCP_CONNECTION_ERROR
        else:
            pytest.fail("no reconnect after a restart")


_ = (sys, file_appears)


def test_mcp_tool_with_the_client_first_says_the_order() -> None:
    """openJiuwen's MCPTool takes (client, card); ours takes (card, client)."""
    import pytest

    from toolweave.mcp import McpTool, McpToolCard

    card = McpToolCard(name="echo", server_name="s")
    with pytest.raises(TypeError, match=r"McpTool\(card, client\)"):
        McpTool(object(), card)  # type: ignore[arg-type]


def test_invalid_server_config_is_a_typed_error() -> None:
    import pytest

    from toolweave import ErrorCode, ToolCardError
    from toolweave.mcp import McpServerConfig

    with pytest.raises(ToolCardError) as info:
        McpServerConfig(server_name="fs")
    assert info.value.code == ErrorCode.TOOL_CARD_INVALID
    assert info.value.message == "McpServerConfig: a stdio MCP server needs params['command']"
    with pytest.raises(ToolCardError, match="client_type"):
        McpServerConfig(server_name="fs", client_type="websocket", params={"url": "ws://x"})


def _fingerprint(header: str) -> str:
    """What the demo server's auth_seen tool answers for this Authorization header."""
    return hashlib.sha256(header.encode()).hexdigest()[:16]


async def test_http_tool_auth_fires_per_connection_so_tokens_rotate(
    demo_http: ServerProcess, demo_http_config: McpServerConfig
) -> None:
    fw = CallbackFramework()
    seen: list[dict[str, Any]] = []
    tokens = (f"t{i}" for i in range(1, 100))

    @fw.on(E.TOOL_AUTH)
    def rotate(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        return {"headers": {"Authorization": f"Bearer {next(tokens)}"}, "query": {"k": "v"}}

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_http_config, callbacks=fw) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["auth_seen"].ainvoke({}) == f"{_fingerprint('Bearer t1')}|k=v"
        assert await tools["auth_seen"].ainvoke({}) == f"{_fingerprint('Bearer t1')}|k=v"
        assert len(seen) == 1
        assert seen[0]["tool_type"] == "mcp" and seen[0]["server_name"] == "demo"
        assert seen[0]["url"] == demo_http_config.url
        with pytest.raises(McpError):  # the connection breaks
            await tools["die"].ainvoke({"after": 0.2})
        await asyncio.to_thread(demo_http.restart)
        # the reconnect asked for credentials again, and the new connection carries them
        answer = await tools["auth_seen"].ainvoke({})
        assert len(seen) >= 2
        assert answer == f"{_fingerprint(f'Bearer t{len(seen)}')}|k=v"


async def test_stdio_never_fires_tool_auth(demo_config: McpServerConfig) -> None:
    fw = CallbackFramework()
    fired: list[Any] = []
    fw.register(E.TOOL_AUTH, lambda: fired.append(1))
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config, callbacks=fw) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["auth_seen"].ainvoke({}) == "|"
    assert fired == []
